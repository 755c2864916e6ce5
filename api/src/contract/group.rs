//! Query parameters read together: a list's filters, one argument of its handler instead of
//! one argument each. poem-openapi documents one parameter per argument, so a group is
//! documented as one parameter that marks itself ([`QUERY_GROUP`]) and lists its members;
//! [`super::document`] writes the members in its place, each as poem-openapi writes a
//! `Query<T>`. Each member is read as `Query<T>` reads it, with its errors.

use poem_openapi::param::Query;
use poem_openapi::types::ParseFromParameter;
use poem_openapi::{ApiExtractor, ExtractParamOptions};
use serde_json::{Value, json};

/// The title of a group's marker parameter schema.
pub const QUERY_GROUP: &str = "perpsim query group";

/// Member `name` of the request's query, read by poem-openapi's `Query<T>` with the options
/// it has as a plain handler argument (exploded, case-sensitive, no default).
pub async fn member<T: ParseFromParameter>(
    request: &poem::Request,
    body: &mut poem::RequestBody,
    name: &'static str,
) -> poem::Result<T> {
    let options = ExtractParamOptions {
        name,
        ignore_case: false,
        default_value: None,
        example_value: None,
        explode: true,
        style: None,
    };
    Ok(Query::<T>::from_request(request, body, options).await?.0)
}

/// Declares a group: its struct, and an extractor documenting it as its members, in order.
macro_rules! query_group {
    ($(#[$doc:meta])* pub struct $name:ident {
        $($field:ident as $param:literal: $ty:ty),* $(,)?
    }) => {
        $(#[$doc])*
        pub struct $name {
            $(pub $field: $ty),*
        }

        impl<'a> poem_openapi::ApiExtractor<'a> for $name {
            const TYPES: &'static [poem_openapi::ApiExtractorType] =
                &[poem_openapi::ApiExtractorType::Parameter];
            type ParamType = ();
            type ParamRawType = ();

            fn register(registry: &mut poem_openapi::registry::Registry) {
                $(<$ty as poem_openapi::types::Type>::register(registry);)*
            }

            fn param_in() -> Option<poem_openapi::registry::MetaParamIn> {
                Some(poem_openapi::registry::MetaParamIn::Query)
            }

            fn param_schema_ref() -> Option<poem_openapi::registry::MetaSchemaRef> {
                let mut marker = poem_openapi::registry::MetaSchema::new("object");
                marker.title = Some($crate::contract::group::QUERY_GROUP.to_owned());
                $(
                    marker.required.push($param);
                    let member = <$ty as poem_openapi::types::Type>::schema_ref();
                    marker.properties.push(($param, member));
                )*
                Some(poem_openapi::registry::MetaSchemaRef::Inline(Box::new(marker)))
            }

            async fn from_request(
                request: &'a poem::Request,
                body: &mut poem::RequestBody,
                _: poem_openapi::ExtractParamOptions<()>,
            ) -> poem::Result<Self> {
                Ok($name {
                    $($field: $crate::contract::group::member(request, body, $param).await?),*
                })
            }
        }
    };
}

pub(crate) use query_group;

/// Each query group's marker parameter replaced by its members, in order.
pub(super) fn expand(parameters: &mut Vec<Value>) {
    let mut expanded = Vec::with_capacity(parameters.len());
    for param in parameters.drain(..) {
        let schema = &param["schema"];
        if schema["title"] != QUERY_GROUP {
            expanded.push(param);
            continue;
        }
        let names = schema["required"]
            .as_array()
            .expect("a group lists its members");
        for name in names {
            let name = name.as_str().expect("member names are strings");
            expanded.push(json!({"deprecated": false, "explode": true, "in": "query",
                "name": name, "required": false, "schema": schema["properties"][name]}));
        }
    }
    *parameters = expanded;
}
