//! The broker's customer a path's `{code}` names: the one extractor every operation under
//! `/customers/{code}` takes. It is named `Path` because poem-openapi recognises a path
//! parameter by that name (it renames the route's parameters for every `…::Path` argument),
//! and is used as `customer::Path`.
//!
//! Every operation under `/customers/{code}` takes `v1::customer::Path`, the one extractor of a
//! broker's customer: documented as the plain string path parameter, it takes the view the
//! request reads, and `customer()` resolves the code there (404 alike for an unknown code and
//! another broker's customer, D2) as the handler's first step, after poem-openapi checked the
//! other parameters and the body, so errors keep their order.

use std::sync::Arc;

use perpsim_core::ids::{BrokerCode, CustomerCode};
use perpsim_core::{Error, ErrorCode};
use perpsim_systems::ReadView;
use perpsim_systems::records::venue::CustomerView;
use poem::{Request, RequestBody};
use poem_openapi::registry::{MetaParamIn, MetaSchemaRef, Registry};
use poem_openapi::types::Type;
use poem_openapi::{ApiExtractor, ApiExtractorType, ExtractParamOptions};

use super::AuthedBroker;
use crate::errors::error_response;
use crate::state::AppState;

/// A path's `{code}`: the customer of the authenticated broker it names, with the view the
/// request reads. Extraction only takes the code; [`Path::customer`] resolves it
/// where the handler starts, after poem-openapi has checked the request's other parameters
/// and body, so a request wrong in several ways is told of the same error first as before.
pub struct Path {
    view: Arc<ReadView>,
    broker: BrokerCode,
    code: String,
}

impl Path {
    /// The published view the request reads (the one the customer is resolved in).
    pub fn view(&self) -> Arc<ReadView> {
        Arc::clone(&self.view)
    }

    /// Unknown codes and other brokers' customers are answered alike, 404 NOT_FOUND (D2).
    pub fn customer(&self) -> Result<&CustomerView, Error> {
        customer_of(&self.view, self.broker, &self.code)
    }
}

/// Documented as the plain string path parameter it is read from.
impl<'a> ApiExtractor<'a> for Path {
    const TYPES: &'static [ApiExtractorType] = &[ApiExtractorType::Parameter];
    const PARAM_IS_REQUIRED: bool = true;

    type ParamType = String;
    type ParamRawType = String;

    fn register(registry: &mut Registry) {
        <String as Type>::register(registry);
    }

    fn param_in() -> Option<MetaParamIn> {
        Some(MetaParamIn::Path)
    }

    fn param_schema_ref() -> Option<MetaSchemaRef> {
        Some(String::schema_ref())
    }

    async fn from_request(
        request: &'a Request,
        _body: &mut RequestBody,
        param_opts: ExtractParamOptions<Self::ParamType>,
    ) -> poem::Result<Self> {
        let refused = |message: &str| {
            poem::Error::from_response(error_response(ErrorCode::Unauthorized, message))
        };
        let broker = request
            .extensions()
            .get::<AuthedBroker>()
            .ok_or_else(|| refused("a signed request is required"))?
            .0
            .broker;
        let state = request
            .data::<Arc<AppState>>()
            .expect("the application carries its state");
        Ok(Path {
            view: state.engine.view(),
            broker,
            code: request
                .raw_path_param(param_opts.name)
                .unwrap_or_default()
                .to_owned(),
        })
    }
}

/// The broker's customer addressed by `code`. Unknown codes and other brokers' customers are
/// answered alike, 404 NOT_FOUND (D2).
pub fn customer_of<'v>(
    view: &'v ReadView,
    broker: BrokerCode,
    code: &str,
) -> Result<&'v CustomerView, Error> {
    CustomerCode::parse(code)
        .and_then(|c| view.customer_of(broker, c))
        .ok_or_else(|| Error::not_found(format!("customer {code} does not exist")))
}
