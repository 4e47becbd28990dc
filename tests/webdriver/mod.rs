//! A small W3C WebDriver client for headless Chromium through chromedriver (Debian's
//! `chromium` and `chromium-driver`): the commands the browser tests use, over the same
//! HTTP/1.1 client as the other server tests, every wait bounded.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::process::{Child, Command};

use crate::common::call;

/// The key of an element reference in WebDriver's JSON.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Flags for a quiet headless Chromium: no sandbox (tests run as root), no GPU, and none
/// of its background calls to Google's services (updates, sync, QUIC probes), which
/// would otherwise try the network and log errors.
const CHROMIUM_FLAGS: [&str; 9] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
];

/// `name` on `PATH`, or at Debian's path.
pub fn program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// chromedriver on a free loopback port, killed when dropped.
pub struct Driver {
    addr: SocketAddr,
    _child: Child,
}

impl Driver {
    /// Starts `chromedriver` and waits (bounded) until it is ready.
    pub async fn start(chromedriver: &Path) -> Driver {
        let port = {
            let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
            listener.local_addr().expect("an address").port()
        };
        let child = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start chromedriver");
        let driver = Driver {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            _child: child,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(status) = driver.status().await
                && status["ready"] == true
            {
                return driver;
            }
            assert!(Instant::now() < deadline, "chromedriver is not ready");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn status(&self) -> Result<Value, std::io::Error> {
        tokio::net::TcpStream::connect(self.addr).await?;
        Ok(command(self.addr, "GET", "/status", None).await)
    }

    /// A new browser session: headless Chromium at `chromium` with a fresh profile in
    /// `profile`, a window of `width` × `height`, its console kept for
    /// [`Session::console`].
    pub async fn session(
        &self,
        chromium: &Path,
        profile: &Path,
        (width, height): (u32, u32),
    ) -> Session {
        let mut args: Vec<String> = CHROMIUM_FLAGS.iter().map(|f| f.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        args.push(format!("--window-size={width},{height}"));
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args},
            "goog:loggingPrefs": {"browser": "ALL"},
            "timeouts": {"script": 20_000, "pageLoad": 30_000, "implicit": 0},
        }}});
        let created = command(self.addr, "POST", "/session", Some(capabilities)).await;
        let id = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_owned();
        Session {
            driver: self.addr,
            id,
        }
    }
}

/// One browser window.
pub struct Session {
    driver: SocketAddr,
    id: String,
}

/// One WebDriver command; its `value`, after checking that it is no error.
async fn command(driver: SocketAddr, method: &str, path: &str, body: Option<Value>) -> Value {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let headers = [("content-type", "application/json")];
    let answer = tokio::time::timeout(
        Duration::from_secs(60),
        call(driver, method, path, &headers, &body),
    )
    .await
    .unwrap_or_else(|_| panic!("{method} {path}: no answer in 60 s"));
    let mut reply = answer.json();
    assert!(
        answer.status == 200,
        "{method} {path}: {} {reply}",
        answer.status
    );
    reply["value"].take()
}

impl Session {
    async fn command(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let path = format!("/session/{}{path}", self.id);
        command(self.driver, method, &path, body).await
    }

    /// Opens `url`; returns when its document has loaded.
    pub async fn open(&self, url: &str) {
        self.command("POST", "/url", Some(json!({"url": url})))
            .await;
    }

    /// Runs `script` (a function body; `arguments` holds `args`) and returns its result.
    pub async fn script(&self, script: &str, args: Value) -> Value {
        let body = json!({"script": script, "args": args});
        self.command("POST", "/execute/sync", Some(body)).await
    }

    /// Polls `script` until it returns something other than `null` or `false`, for at
    /// most `limit`; returns that value.
    pub async fn until(&self, what: &str, limit: Duration, script: &str, args: Value) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let value = self.script(script, args.clone()).await;
            if !(value.is_null() || value == false) {
                return value;
            }
            assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The element `css` selects, waiting for it for at most `limit`.
    pub async fn element(&self, css: &str, limit: Duration) -> Element {
        let deadline = Instant::now() + limit;
        loop {
            let path = format!("/session/{}/elements", self.id);
            let body = json!({"using": "css selector", "value": css});
            let found = command(self.driver, "POST", &path, Some(body)).await;
            if let Some(id) = found
                .as_array()
                .and_then(|all| all.first())
                .and_then(|first| first[ELEMENT].as_str())
            {
                return Element(id.to_owned());
            }
            assert!(Instant::now() < deadline, "{css}: not within {limit:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Clicks `element` (scrolled into view first, as a person would).
    pub async fn click(&self, element: &Element) {
        let path = format!("/element/{}/click", element.0);
        self.command("POST", &path, Some(json!({}))).await;
    }

    /// Replaces the text of an input or text area with `text`: the old text selected
    /// and deleted with keys, the new one pasted (Chromium's `Input.insertText`, one
    /// input event: typed key by key, each key re-renders Swagger UI's whole operation,
    /// a second a key on a busy machine).
    pub async fn type_over(&self, element: &Element, text: &str) {
        let path = format!("/element/{}/value", element.0);
        // Control+A (Control released by NULL), Backspace: what a person does.
        let clear = json!({"text": "\u{E009}a\u{E000}\u{E003}"});
        self.command("POST", &path, Some(clear)).await;
        let paste = json!({"cmd": "Input.insertText", "params": {"text": text}});
        self.command("POST", "/goog/cdp/execute", Some(paste)).await;
    }

    /// Every message the page's console and the browser logged since the last call
    /// (level, source, text).
    pub async fn console(&self) -> Vec<Value> {
        let body = json!({"type": "browser"});
        let logged = self.command("POST", "/se/log", Some(body)).await;
        logged.as_array().cloned().unwrap_or_default()
    }

    /// A PNG of the window.
    pub async fn screenshot(&self) -> Vec<u8> {
        let encoded = self.command("GET", "/screenshot", None).await;
        base64(encoded.as_str().expect("base64 text"))
    }

    /// Closes the window and its browser.
    pub async fn quit(self) {
        let path = format!("/session/{}", self.id);
        command(self.driver, "DELETE", &path, None).await;
    }
}

/// An element of the page.
pub struct Element(String);

/// Standard base64 (what WebDriver sends screenshots in).
fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let digits: Vec<u8> = text
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
        .map(value)
        .collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let bits = chunk
            .iter()
            .enumerate()
            .fold(0u32, |bits, (i, &d)| bits | u32::from(d) << (18 - 6 * i));
        out.extend_from_slice(&bits.to_be_bytes()[1..chunk.len()]);
    }
    out
}

#[test]
fn base64_decodes() {
    assert_eq!(base64("aGVsbG8="), b"hello");
    assert_eq!(base64("aGVsbG8h"), b"hello!");
    assert_eq!(base64("aGk="), b"hi");
}
