//! A minimal Lambda Runtime API endpoint (the part a `provided.al2023` bootstrap talks to):
//! it hands out queued events on `/invocation/next` and records what the function answers.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Default)]
struct State {
    events: VecDeque<(String, String)>,
    responses: Vec<(String, String)>,
    errors: Vec<String>,
}

pub struct RuntimeApi {
    pub addr: String,
    state: Arc<Mutex<State>>,
}

impl RuntimeApi {
    /// Serves `events` (request id, JSON payload) in order.
    pub fn start(events: Vec<(String, String)>) -> RuntimeApi {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let state = Arc::new(Mutex::new(State {
            events: events.into(),
            ..State::default()
        }));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = shared.clone();
                std::thread::spawn(move || serve(stream, state));
            }
        });
        RuntimeApi { addr, state }
    }

    /// Events the function has not taken yet.
    pub fn pending(&self) -> usize {
        self.state.lock().unwrap().events.len()
    }

    /// Waits for `count` responses (or an error) and returns the responses.
    pub fn wait_responses(&self, count: usize, timeout: Duration) -> Vec<(String, String)> {
        let deadline = Instant::now() + timeout;
        loop {
            {
                let state = self.state.lock().unwrap();
                assert!(
                    state.errors.is_empty(),
                    "the function reported errors: {:?}",
                    state.errors
                );
                if state.responses.len() >= count {
                    return state.responses.clone();
                }
            }
            assert!(Instant::now() < deadline, "no response from the function");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn serve(stream: TcpStream, state: Arc<Mutex<State>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    // HTTP/1.1 keep-alive: one request after another on the same connection.
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let body = String::from_utf8_lossy(&body).into_owned();
        let mut parts = request_line.split_whitespace();
        let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let reply = |writer: &mut TcpStream, status: &str, headers: &str, body: &str| {
            let _ = write!(
                writer,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\n{headers}\r\n{body}",
                body.len()
            );
        };
        if method == "GET" && path.ends_with("/runtime/invocation/next") {
            // Long-poll: hold the request until an event is queued.
            let event = loop {
                if let Some(e) = state.lock().unwrap().events.pop_front() {
                    break e;
                }
                std::thread::sleep(Duration::from_millis(50));
            };
            let deadline = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_millis()
                + 300_000;
            let headers = format!(
                "Content-Type: application/json\r\nLambda-Runtime-Aws-Request-Id: {}\r\nLambda-Runtime-Deadline-Ms: {deadline}\r\nLambda-Runtime-Invoked-Function-Arn: arn:aws:lambda:us-east-1:123456789012:function:symdex\r\nLambda-Runtime-Trace-Id: Root=1-00000000-000000000000000000000000\r\n",
                event.0
            );
            reply(&mut writer, "200 OK", &headers, &event.1);
        } else if method == "POST" && path.ends_with("/response") {
            let id = path.split('/').nth(4).unwrap_or("").to_string();
            state.lock().unwrap().responses.push((id, body));
            reply(
                &mut writer,
                "202 Accepted",
                "Content-Type: application/json\r\n",
                "{\"status\":\"OK\"}",
            );
        } else if method == "POST" && path.ends_with("/error") {
            state.lock().unwrap().errors.push(format!("{path}: {body}"));
            reply(
                &mut writer,
                "202 Accepted",
                "Content-Type: application/json\r\n",
                "{\"status\":\"OK\"}",
            );
        } else {
            reply(&mut writer, "404 Not Found", "", "");
        }
    }
}
