//! `POST` and `GET /v1/customers` (D3).

use std::sync::Arc;

use perpsim_core::Error;
use perpsim_core::ids::{CustomerCode, MAX_EXTERNAL_ID};
use perpsim_core::time::Timestamp;
use perpsim_systems::records::venue::CustomerView;
use poem_openapi::param::Query;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi};

use super::{Signed, Tag, customer};
use crate::contract::Nullable;
use crate::contract::Text;
use crate::errors::ApiError;
use crate::pagination::{self, PageRequest, ResponseMetadata, Scope};
use crate::state::AppState;
use perpsim_systems::command::CreateCustomer;

/// Body of `POST /v1/customers`.
#[derive(Object, Debug)]
#[oai(deny_unknown_fields, example)]
pub struct CreateCustomerRequest {
    /// The broker's own identifier for the customer: 1 to 64 characters, no control
    /// characters. Not required to be unique.
    pub external_id: Option<Text>,
}

/// A customer of the broker.
#[derive(Object, Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[oai(example)]
pub struct CustomerRecord {
    /// Addresses the customer in every `/v1/customers/{code}/…` path.
    pub customer_code: String,
    pub broker_code: String,
    pub external_id: Nullable<String>,
    /// RFC 3339 UTC (simulation time).
    pub created_at: String,
}

impl poem_openapi::types::Example for CustomerRecord {
    fn example() -> Self {
        CustomerRecord {
            customer_code: "5b0b5d2e-8a7e-4b8e-9c59-2f0e6f9b1a11".into(),
            broker_code: "0f2c3b1e-7d4a-4c55-8f0e-1b2a3c4d5e6f".into(),
            external_id: Some("crm-42".into()).into(),
            created_at: "2026-01-01T00:00:00.000Z".into(),
        }
    }
}

impl From<&CustomerView> for CustomerRecord {
    fn from(c: &CustomerView) -> Self {
        CustomerRecord {
            customer_code: c.code.to_string(),
            broker_code: c.broker.to_string(),
            external_id: c.external_id.clone().into(),
            created_at: c.created_at.to_rfc3339(),
        }
    }
}

/// A page of customers, oldest first.
#[derive(Object, Debug, serde::Deserialize)]
#[oai(example)]
pub struct CustomerPage {
    pub data: Vec<CustomerRecord>,
    pub response_metadata: ResponseMetadata,
}

#[derive(ApiResponse)]
pub enum CustomerCreated {
    /// The customer was created.
    #[oai(status = 201)]
    Created(Json<CustomerRecord>),
}

fn validate_external_id(id: &Option<String>) -> Result<(), Error> {
    match id {
        Some(id) if id.is_empty() || id.chars().count() > MAX_EXTERNAL_ID => {
            Err(Error::validation(format!(
                "external_id must be 1 to {MAX_EXTERNAL_ID} characters"
            )))
        }
        Some(id) if id.chars().any(char::is_control) => Err(Error::validation(
            "external_id must not contain control characters",
        )),
        _ => Ok(()),
    }
}

pub struct CustomersApi;

#[OpenApi(tag = "Tag::Customers")]
impl CustomersApi {
    /// Create a customer.
    ///
    /// A broker holds at most 100 000 customers by default (`--max-customers`); past it
    /// 400 VALIDATION_ERROR naming the bound.
    #[oai(path = "/customers", method = "post", operation_id = "createCustomer")]
    async fn create(
        &self,
        state: poem::web::Data<&Arc<AppState>>,
        auth: Signed,
        body: Json<CreateCustomerRequest>,
    ) -> Result<CustomerCreated, ApiError> {
        let external_id = body.0.external_id.map(String::from);
        validate_external_id(&external_id)?;
        let command = CreateCustomer {
            broker: auth.broker(),
            external_id,
        };
        let customer = state.engine.submit(command, auth.admission()).await?;
        Ok(CustomerCreated::Created(Json(CustomerRecord::from(
            &customer,
        ))))
    }

    /// Read one customer.
    ///
    /// 404 NOT_FOUND for an unknown code and, exactly alike, for a customer of another broker.
    #[oai(
        path = "/customers/:code",
        method = "get",
        operation_id = "getCustomer"
    )]
    async fn get(
        &self,
        _auth: Signed,
        /// The customer_code.
        code: customer::Path,
    ) -> Result<Json<CustomerRecord>, ApiError> {
        let customer = code.customer()?;
        Ok(Json(CustomerRecord::from(customer)))
    }

    /// List the broker's customers, oldest first.
    ///
    /// Cursor pagination: `limit` 1–1000 (default 100); `after` takes a page's `end_cursor`
    /// for the next page, `before` a page's `start_cursor` for the previous one; not both.
    #[oai(path = "/customers", method = "get", operation_id = "listCustomers")]
    async fn list(
        &self,
        state: poem::web::Data<&Arc<AppState>>,
        auth: Signed,
        /// Page size, 1 to 1000.
        limit: Query<Option<u32>>,
        /// Cursor: the page after it.
        after: Query<Option<String>>,
        /// Cursor: the page before it.
        before: Query<Option<String>>,
    ) -> Result<poem_openapi::payload::Json<CustomerPage>, ApiError> {
        let scope = Scope {
            list: "customers",
            broker: auth.broker(),
            filters: "",
        };
        let req = PageRequest::<(Timestamp, CustomerCode)>::parse(
            &state.cursors,
            &scope,
            limit.0,
            after.0.as_deref(),
            before.0.as_deref(),
        )?;
        let view = state.engine.view();
        let empty = imbl::OrdSet::new();
        let set = view
            .customers_by_broker
            .get(&auth.broker())
            .unwrap_or(&empty);
        let page = pagination::page(set, pagination::all(), &req, &state.cursors, &scope);
        let data = page
            .keys
            .iter()
            .map(|(_, code)| {
                CustomerRecord::from(view.customers.get(code).expect("listed customers exist"))
            })
            .collect();
        Ok(Json(CustomerPage {
            data,
            response_metadata: page.metadata,
        }))
    }
}

impl poem_openapi::types::Example for CreateCustomerRequest {
    fn example() -> Self {
        CreateCustomerRequest {
            external_id: Some("crm-42".into()),
        }
    }
}

impl poem_openapi::types::Example for CustomerPage {
    fn example() -> Self {
        CustomerPage {
            data: vec![<CustomerRecord as poem_openapi::types::Example>::example()],
            response_metadata: crate::pagination::ResponseMetadata::example(),
        }
    }
}
