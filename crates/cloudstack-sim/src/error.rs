//! CloudStack API errors: HTTP status, `cserrorcode` and text exactly as the server sends them (API.md §2.3).

use serde_json::{Value, json};

/// An error answered to an API call (or stored as a failed job result).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code} ({cs_code:?}): {text}")]
pub struct ApiError {
    /// HTTP status and `errorcode`.
    pub code: u16,
    /// `cserrorcode`; `None` on the signature-failure path, which sets none.
    pub cs_code: Option<u32>,
    /// `errortext`.
    pub text: String,
}

impl ApiError {
    /// Any code with an explicit `cserrorcode`.
    pub fn new(code: u16, cs_code: Option<u32>, text: impl Into<String>) -> Self {
        Self {
            code,
            cs_code,
            text: text.into(),
        }
    }

    /// 431 from an `InvalidParameterValueException` (cs 4350).
    pub fn param(text: impl Into<String>) -> Self {
        Self::new(431, Some(4350), text)
    }

    /// 530 (cs 9999) for a `CloudRuntimeException` a synchronous command lets out of
    /// `execute()`: `ApiServer.handleRequest` shows a root admin the exception's text
    /// (`<class>: <message>`, `cause` being the class) and anyone else "Internal error
    /// executing command, please contact your system administrator".
    pub fn runtime(caller_is_admin: bool, cause: &str, message: &str) -> Self {
        let text = if caller_is_admin {
            format!("{cause}: {message}")
        } else {
            "Internal error executing command, please contact your system administrator".into()
        };
        Self::new(530, Some(9999), text)
    }

    /// 530 (cs 0) for a failure a command's `execute()` wraps as `new
    /// CloudRuntimeException(e)` (`ListSslCertsCmd`, `DeleteSslCertCmd`): that constructor
    /// takes the inner exception's message and sets no `cserrorcode`, and
    /// `ApiServer.handleRequest` shows the message to a root admin only — anyone else gets
    /// `BaseCmd.USER_ERROR_MESSAGE`.
    pub fn wrapped(caller_is_admin: bool, message: &str) -> Self {
        let text = if caller_is_admin {
            message.to_owned()
        } else {
            "Internal error executing command, please contact your system administrator".into()
        };
        Self::new(530, Some(0), text)
    }

    /// 530 (cs 4250) for a `CloudRuntimeException(message)` a synchronous command lets out:
    /// `ApiServer.handleRequest` wraps it as `ServerApiException(INTERNAL_ERROR, msg, ex)`,
    /// which keeps the cause's `cserrorcode` (`CSExceptionErrorCode`: 4250), and shows the
    /// message to a root admin only — anyone else gets `BaseCmd.USER_ERROR_MESSAGE`.
    pub fn cloud_runtime(caller_is_admin: bool, message: &str) -> Self {
        let text = if caller_is_admin {
            message.to_owned()
        } else {
            "Internal error executing command, please contact your system administrator".into()
        };
        Self::new(530, Some(4250), text)
    }

    /// 431 from a bare `ServerApiException` (cs 9999), e.g. the parameter-processing texts.
    pub fn param_bare(text: impl Into<String>) -> Self {
        Self::new(431, Some(9999), text)
    }

    /// 431 `… due to missing parameter <name>`.
    pub fn missing(command: &str, name: &str) -> Self {
        Self::param_bare(format!(
            "Unable to execute API command {} due to missing parameter {name}",
            command.to_lowercase()
        ))
    }

    /// 431 for a UUID parameter that is malformed or names no entity.
    pub fn invalid_uuid(command: &str, name: &str, value: &str) -> Self {
        Self::param_bare(format!(
            "Unable to execute API command {} due to invalid value. Invalid parameter {name} value={value} due to incorrect long value format, or entity does not exist or due to incorrect parameter annotation for the field in api cmd class.",
            command.to_lowercase()
        ))
    }

    /// 431 for a value that does not parse as the parameter's type.
    pub fn invalid_value(command: &str, name: &str, value: &str) -> Self {
        Self::param_bare(format!(
            "Unable to execute API command {} due to invalid value {value} for parameter {name}",
            command.to_lowercase()
        ))
    }

    /// 537 network rule conflict (cs 4360).
    pub fn conflict(text: impl Into<String>) -> Self {
        Self::new(537, Some(4360), text)
    }

    /// 531 permission denied (cs 4365).
    pub fn denied(text: impl Into<String>) -> Self {
        Self::new(531, Some(4365), text)
    }

    /// 533 no free public address (cs 4320).
    pub fn no_address(text: impl Into<String>) -> Self {
        Self::new(533, Some(4320), text)
    }

    /// 530 internal error (cs 4250).
    pub fn internal(text: impl Into<String>) -> Self {
        Self::new(530, Some(4250), text)
    }

    /// 536 resource in use (cs 4375).
    pub fn in_use(text: impl Into<String>) -> Self {
        Self::new(536, Some(4375), text)
    }

    /// 401 from a failed signature/credential check (no `cserrorcode`).
    pub fn unauthorized() -> Self {
        Self::new(
            401,
            None,
            "unable to verify user credentials and/or request signature",
        )
    }

    /// 429 from the API rate limiter.
    pub fn throttled(retry_after_ms: u64) -> Self {
        Self::new(
            429,
            Some(9999),
            format!(
                "The given user has reached his/her account api limit, please retry after [{retry_after_ms}] ms."
            ),
        )
    }

    /// The `ExceptionResponse` body (without the command envelope). An empty text is a
    /// `null` description, which the serializer leaves out (e.g. `uploadSslCert`'s
    /// `ServerApiException(INTERNAL_ERROR, e.getMessage())` of a message-less exception).
    pub fn body(&self) -> Value {
        let mut body = json!({"uuidList": [], "errorcode": self.code});
        if !self.text.is_empty() {
            body["errortext"] = json!(self.text);
        }
        if let Some(cs) = self.cs_code {
            body["cserrorcode"] = json!(cs);
        }
        body
    }
}
