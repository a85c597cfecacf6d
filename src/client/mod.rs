//! The command-line client of a running server: `entiserve upload` sends a CSV or ZIP file to the
//! uploader and follows the background request to its result file, `entiserve bgrs` lists the
//! caller's background requests or shows one with its details log.
//!
//! This module holds what both share: the server flags ([`ServerArgs`]), the connection with its
//! credentials ([`Conn`]), the errors of a call ([`CallError`]) and how a failure becomes an
//! exit code ([`Failure`]). Exit codes: 0 success, 1 an error, 2 an upload with failed rows,
//! 130 interrupted by Ctrl-C.

pub mod bgrs;
pub mod upload;

use serde_json::Value as Json;
use std::fmt;
use std::process::ExitCode;
use std::time::Duration;

/// Exit code of a run interrupted by Ctrl-C.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Where the server is and who calls it.
#[derive(clap::Args, Debug, Clone)]
pub struct ServerArgs {
    /// Base address of the server.
    #[arg(long, env = "ENTISERVE_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// Login to sign in with (the password comes from ENTISERVE_PASSWORD, else a prompt).
    #[arg(long, env = "ENTISERVE_USER", default_value = "admin")]
    pub user: String,
}

/// A failed run: the message printed on stderr (as `error: <message>`) and the exit code.
#[derive(Debug)]
pub struct Failure {
    pub message: String,
    pub code: u8,
}

impl Failure {
    /// A failure with exit code 1.
    pub fn new(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code: 1,
        }
    }
}

impl From<CallError> for Failure {
    fn from(e: CallError) -> Failure {
        Failure::new(e.to_string())
    }
}

/// Prints a failure and turns the outcome of a run into the process exit code.
pub fn exit_code(outcome: Result<u8, Failure>) -> ExitCode {
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("error: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

/// A single-threaded runtime for the client commands.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Why a call to the server failed.
#[derive(Debug)]
pub enum CallError {
    /// No connection or no complete answer.
    Net { base: String, detail: String },
    /// The server answered with an error status and (usually) `{"error", "description"}`.
    Http {
        status: u16,
        error: String,
        description: String,
    },
}

impl CallError {
    /// The HTTP status, for an error answer.
    pub fn status(&self) -> Option<u16> {
        match self {
            CallError::Http { status, .. } => Some(*status),
            CallError::Net { .. } => None,
        }
    }

    /// The server's description of an error answer, or the whole message otherwise.
    pub fn description(&self) -> String {
        match self {
            CallError::Http { description, .. } => description.clone(),
            other => other.to_string(),
        }
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Net { base, detail } => write!(f, "cannot reach {base}: {detail}"),
            CallError::Http {
                status: 401,
                description,
                ..
            } => write!(f, "the server refused the credentials (401): {description}"),
            CallError::Http {
                status,
                error,
                description,
            } => write!(f, "{description} ({status} {error})"),
        }
    }
}

/// The innermost causes of a `reqwest` error, which say what actually happened (for example
/// `Connection refused`).
fn net_detail(e: &reqwest::Error) -> String {
    let mut causes = Vec::new();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        causes.push(s.to_string());
        source = s.source();
    }
    let what = if e.is_connect() {
        "connection failed"
    } else if e.is_timeout() {
        "timed out"
    } else {
        "the request failed"
    };
    match causes.last() {
        Some(root) => format!("{what}: {root}"),
        None => format!("{what}: {e}"),
    }
}

/// A connection to one server as one user.
pub struct Conn {
    pub base: String,
    pub user: String,
    password: String,
    pub http: reqwest::Client,
}

impl Conn {
    /// A connection for `args`; the password is `ENTISERVE_PASSWORD` or asked on the terminal.
    pub fn open(args: &ServerArgs) -> Result<Conn, Failure> {
        let base = args.url.trim_end_matches('/').to_string();
        if !base.starts_with("http://") {
            // reqwest is built without TLS: plain http only (a proxy in front for https).
            return Err(Failure::new(format!(
                "--url must start with http:// (this client speaks plain HTTP); got `{}`",
                args.url
            )));
        }
        let password = match std::env::var("ENTISERVE_PASSWORD") {
            Ok(p) if !p.is_empty() => p,
            _ => rpassword::prompt_password(format!("Password for {} at {base}: ", args.user))
                .map_err(|e| {
                    Failure::new(format!(
                        "no password: set ENTISERVE_PASSWORD or run on a terminal ({e})"
                    ))
                })?,
        };
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("entiserve/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Failure::new(format!("cannot set up HTTP: {e}")))?;
        Ok(Conn {
            base,
            user: args.user.clone(),
            password,
            http,
        })
    }

    /// The full address of a server path (which starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A request to `path` with the credentials.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, self.url(path))
            .basic_auth(&self.user, Some(&self.password))
    }

    /// Sends `req`; an error status becomes [`CallError::Http`] with the server's description.
    pub async fn send(&self, req: reqwest::RequestBuilder) -> Result<reqwest::Response, CallError> {
        let r = req.send().await.map_err(|e| self.net(&e))?;
        let status = r.status();
        if status.is_success() {
            return Ok(r);
        }
        let text = r.text().await.unwrap_or_default();
        let (error, description) = match serde_json::from_str::<Json>(&text) {
            Ok(j) if j.get("description").is_some() => (
                j["error"].as_str().unwrap_or("error").to_string(),
                j["description"].as_str().unwrap_or("").to_string(),
            ),
            _ => {
                let snippet: String = text.trim().chars().take(200).collect();
                let description = if snippet.is_empty() {
                    status.canonical_reason().unwrap_or("error").to_string()
                } else {
                    snippet
                };
                ("http_error".to_string(), description)
            }
        };
        Err(CallError::Http {
            status: status.as_u16(),
            error,
            description,
        })
    }

    /// GETs `path` and parses the JSON answer.
    pub async fn get_json(&self, path: &str) -> Result<Json, CallError> {
        let req = self
            .request(reqwest::Method::GET, path)
            .timeout(Duration::from_secs(60));
        let r = self.send(req).await?;
        let bytes = r.bytes().await.map_err(|e| self.net(&e))?;
        serde_json::from_slice(&bytes).map_err(|e| CallError::Net {
            base: self.base.clone(),
            detail: format!("the answer to GET {path} is not JSON: {e}"),
        })
    }

    /// A network error of this connection.
    pub fn net(&self, e: &reqwest::Error) -> CallError {
        CallError::Net {
            base: self.base.clone(),
            detail: net_detail(e),
        }
    }
}

/// A background request record as the server returns it (every value a JSON string).
#[derive(Debug, Clone, Default)]
pub struct Record(pub serde_json::Map<String, Json>);

impl Record {
    /// The first record of a `GET /bgrs/<rid>` answer.
    pub fn from_answer(answer: Json) -> Option<Record> {
        match answer {
            Json::Array(mut a) if !a.is_empty() => match a.swap_remove(0) {
                Json::Object(m) => Some(Record(m)),
                _ => None,
            },
            _ => None,
        }
    }

    /// A field as text (`""` when missing).
    pub fn get(&self, field: &str) -> String {
        match self.0.get(field) {
            Some(Json::String(s)) => s.clone(),
            Some(Json::Null) | None => String::new(),
            Some(other) => other.to_string(),
        }
    }

    /// `status_id` 2: still running.
    pub fn in_progress(&self) -> bool {
        self.get("status_id") == "2"
    }

    /// `progress` as a number from 0 to 100.
    pub fn progress(&self) -> f64 {
        self.get("progress")
            .parse::<f64>()
            .unwrap_or(0.0)
            .clamp(0.0, 100.0)
    }
}

/// Reads one line from stdin without blocking the runtime; `None` at end of input or on a
/// second Ctrl-C.
pub async fn read_answer(interrupt: &mut tokio::signal::unix::Signal) -> Option<String> {
    let read = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        match std::io::stdin().read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line),
        }
    });
    tokio::select! {
        r = read => r.ok().flatten(),
        _ = interrupt.recv() => None,
    }
}
