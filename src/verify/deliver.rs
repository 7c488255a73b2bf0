//! Deliveries over plain TCP: a delivery must control when its last byte is written (the
//! concurrent barrier) and see a reset connection as such, which HTTP client libraries hide.
//! Responses are parsed with `httparse`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// The result of one delivery attempt.
#[derive(Clone, Debug)]
pub struct Response {
    /// `None` when the connection closed or was reset before a status line arrived.
    pub status: Option<u16>,
    pub error: Option<String>,
    pub body: String,
    /// When the request's last byte was written and when the first response byte arrived,
    /// relative to the scenario's start (for overlap detection without the preload).
    pub sent_at: Duration,
    pub first_byte_at: Option<Duration>,
}

/// Resolves `host:port` and refuses anything that is not a loopback address: `verify` starts
/// and kills processes and sends signed deliveries, so it must only ever reach this machine.
pub fn loopback_target(host: &str, port: u16) -> Result<SocketAddr, String> {
    let addrs: Vec<SocketAddr> =
        (host, port).to_socket_addrs().map_err(|e| format!("cannot resolve target host `{host}`: {e}"))?.collect();
    if addrs.is_empty() {
        return Err(format!("target host `{host}` resolves to no address"));
    }
    if let Some(other) = addrs.iter().find(|a| !a.ip().is_loopback()) {
        return Err(format!(
            "refusing target `{host}` ({}): verify only delivers to loopback addresses (127.0.0.0/8, ::1, localhost)",
            other.ip()
        ));
    }
    Ok(addrs[0])
}

pub fn build_request(
    method: &str,
    path: &str,
    host_header: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Vec<u8> {
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host_header}\r\nUser-Agent: retrysafe-verify\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

fn read_response(mut stream: TcpStream, epoch: Instant, sent_at: Duration) -> Response {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let mut first_byte_at = None;
    let mut error = None;
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                first_byte_at.get_or_insert_with(|| epoch.elapsed());
                buf.extend_from_slice(&chunk[..n]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                error = Some(match e.kind() {
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                        "timed out waiting for the response".to_string()
                    }
                    std::io::ErrorKind::ConnectionReset => "connection reset".to_string(),
                    _ => e.to_string(),
                });
                break;
            }
        }
    }
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Response::new(&mut headers);
    match parsed.parse(&buf) {
        Ok(httparse::Status::Complete(len)) => {
            let status = parsed.code;
            let body = String::from_utf8_lossy(&buf[len..]).chars().take(2000).collect();
            Response { status, error: None, body, sent_at, first_byte_at }
        }
        _ => Response {
            status: None,
            error: Some(error.unwrap_or_else(|| "connection closed before a response".to_string())),
            body: String::new(),
            sent_at,
            first_byte_at,
        },
    }
}

fn failed(e: std::io::Error, epoch: Instant) -> Response {
    Response {
        status: None,
        error: Some(e.to_string()),
        body: String::new(),
        sent_at: epoch.elapsed(),
        first_byte_at: None,
    }
}

/// One delivery, waiting at most `timeout` for the response.
pub fn deliver(addr: SocketAddr, request: &[u8], timeout: Duration, epoch: Instant) -> Response {
    let mut stream = match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
        Ok(s) => s,
        Err(e) => return failed(e, epoch),
    };
    let _ = stream.set_read_timeout(Some(timeout));
    if let Err(e) = stream.write_all(request) {
        return failed(e, epoch);
    }
    let sent_at = epoch.elapsed();
    read_response(stream, epoch, sent_at)
}

/// `requests.len()` deliveries released together: every connection is open and holds all
/// but the last byte of its request before any of them completes its request.
pub fn deliver_together(addr: SocketAddr, requests: Vec<Vec<u8>>, timeout: Duration, epoch: Instant) -> Vec<Response> {
    let barrier = Arc::new(Barrier::new(requests.len()));
    let handles: Vec<_> = requests
        .into_iter()
        .map(|request| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5));
                let prepared = stream.and_then(|mut s| {
                    s.set_read_timeout(Some(timeout))?;
                    s.set_nodelay(true)?;
                    s.write_all(&request[..request.len() - 1])?;
                    Ok(s)
                });
                // Every thread reaches the barrier, even one that failed, or the rest would
                // wait forever.
                barrier.wait();
                match prepared {
                    Ok(mut s) => match s.write_all(&request[request.len() - 1..]) {
                        Ok(()) => {
                            let sent_at = epoch.elapsed();
                            read_response(s, epoch, sent_at)
                        }
                        Err(e) => failed(e, epoch),
                    },
                    Err(e) => failed(e, epoch),
                }
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| {
            h.join().unwrap_or_else(|_| Response {
                status: None,
                error: Some("delivery thread panicked".into()),
                body: String::new(),
                sent_at: Duration::ZERO,
                first_byte_at: None,
            })
        })
        .collect()
}

/// Whether something accepts connections on `addr`.
pub fn port_open(addr: SocketAddr) -> bool {
    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}
