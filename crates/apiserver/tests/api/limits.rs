//! Request limits over real sockets: oversized bodies and objects (413), the in-flight caps (429), the request timeout (504), and clients that stall (silent, slowloris, never reading).

use std::time::Duration;

use kcm_apiserver::{RunningServer, Server, ServerConfig, StorageBackend};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::timed;

const TOKEN: &str = "limits-token";

/// A plain-HTTP server on the memory store with small limits, so each is quick to reach.
async fn server(tune: impl FnOnce(&mut ServerConfig)) -> (RunningServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = ServerConfig::new(dir.path());
    config.listen = "127.0.0.1:0".parse().expect("addr");
    config.storage = StorageBackend::Memory;
    config.tls = false;
    config.token = Some(TOKEN.to_owned());
    config.compaction_interval = None;
    tune(&mut config);
    (Server::start(config).await.expect("server starts"), dir)
}

/// An answer read off the wire.
#[derive(Debug)]
struct Answer {
    code: u16,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Request head bytes: `Connection: close`, the admin token, plus `extra` header lines.
fn head(method: &str, path: &str, length: Option<usize>, extra: &[&str]) -> Vec<u8> {
    let mut h = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nConnection: close\r\n"
    );
    if let Some(len) = length {
        h.push_str(&format!("Content-Length: {len}\r\n"));
    }
    for line in extra {
        h.push_str(line);
        h.push_str("\r\n");
    }
    h.push_str("\r\n");
    h.into_bytes()
}

/// Reads one `Connection: close` answer to its end and parses it (the body must be JSON).
async fn read_answer(stream: &mut TcpStream) -> Answer {
    let mut raw = Vec::new();
    // A reset after the whole answer arrived is tolerated; the parse below checks it did.
    let _ = stream.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let code = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    let body = serde_json::from_str(&body).unwrap_or(Value::Null);
    Answer {
        code,
        headers,
        body,
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// Sends a whole request and reads the answer.
async fn request(
    server: &RunningServer,
    method: &str,
    path: &str,
    body: &[u8],
    extra: &[&str],
) -> Answer {
    let mut stream = TcpStream::connect(server.addr()).await.expect("connect");
    stream
        .write_all(&head(method, path, Some(body.len()), extra))
        .await
        .expect("head");
    stream.write_all(body).await.expect("body");
    read_answer(&mut stream).await
}

/// Starts a request whose body never finishes: the head and one byte of a 1 KiB body.
async fn stalled_request(
    server: &RunningServer,
    method: &str,
    path: &str,
    extra: &[&str],
) -> TcpStream {
    let mut stream = TcpStream::connect(server.addr()).await.expect("connect");
    stream
        .write_all(&head(method, path, Some(1024), extra))
        .await
        .expect("head");
    stream.write_all(b"{").await.expect("first byte");
    stream
}

fn configmap(name: &str, bytes: usize) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"blob": "x".repeat(bytes)}
    }))
    .expect("json")
}

/// A PodTemplate of about `bytes` bytes: unlike a ConfigMap's data (at most 1 MiB by
/// validation), an environment value has no size rule, so only the store limits it.
fn pod_template(name: &str, bytes: usize) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "PodTemplate",
        "metadata": {"name": name},
        "template": {"spec": {"containers": [{"name": "c", "image": "nginx",
            "env": [{"name": "BLOB", "value": "x".repeat(bytes)}]}]}}
    }))
    .expect("json")
}

#[tokio::test]
async fn an_oversized_body_gets_413_while_it_is_still_being_sent() {
    timed(async {
        let (server, _dir) = server(|_| {}).await;
        for declared in [true, false] {
            let stream = TcpStream::connect(server.addr()).await.expect("connect");
            let (mut read, mut write) = stream.into_split();
            let len = 20 << 20;
            let extra: &[&str] = if declared {
                &[]
            } else {
                &["Transfer-Encoding: chunked"]
            };
            let head = head(
                "POST",
                "/api/v1/namespaces/default/configmaps",
                declared.then_some(len),
                extra,
            );
            // The client keeps sending its 20 MiB while the answer comes back; the server
            // stops reading at the limit, so the writer eventually fails or blocks.
            let writer = tokio::spawn(async move {
                write.write_all(&head).await?;
                let chunk = vec![b' '; 64 << 10];
                for _ in 0..(len / chunk.len()) {
                    if declared {
                        write.write_all(&chunk).await?;
                    } else {
                        write
                            .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                            .await?;
                        write.write_all(&chunk).await?;
                        write.write_all(b"\r\n").await?;
                    }
                }
                std::io::Result::Ok(())
            });
            let mut raw = Vec::new();
            let _ = read.read_to_end(&mut raw).await;
            writer.abort();
            let text = String::from_utf8_lossy(&raw);
            assert!(
                text.starts_with("HTTP/1.1 413"),
                "declared={declared}: {text:.300}"
            );
            let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
            let body = if body.contains("\r\n") {
                dechunk(body)
            } else {
                body.to_owned()
            };
            let status: Value = serde_json::from_str(&body).expect("a Status body");
            assert_eq!(status["kind"], "Status");
            assert_eq!(status["reason"], "RequestEntityTooLarge");
            assert_eq!(
                status["message"],
                "Request entity too large: limit is 3145728"
            );
        }
        // The server is fine afterwards.
        let ok = request(
            &server,
            "GET",
            "/api/v1/namespaces/default/configmaps",
            b"",
            &[],
        )
        .await;
        assert_eq!(ok.code, 200);
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn an_object_above_the_store_limit_gets_413() {
    timed(async {
        let (server, _dir) = server(|_| {}).await;
        let path = "/api/v1/namespaces/default/podtemplates";
        // 2 MiB: under the 3 MiB body limit, over etcd's 1.5 MiB request limit.
        let big = request(&server, "POST", path, &pod_template("big", 2 << 20), &[]).await;
        assert_eq!(big.code, 413, "{:?}", big.body);
        assert_eq!(big.body["reason"], "RequestEntityTooLarge");
        assert_eq!(big.body["message"], "etcdserver: request is too large");
        let fits = request(&server, "POST", path, &pod_template("fits", 512 << 10), &[]).await;
        assert_eq!(fits.code, 201, "{:?}", fits.body);
        // Growing a stored object past the limit is refused the same way.
        let grown = request(
            &server,
            "PUT",
            &format!("{path}/fits"),
            &pod_template("fits", 2 << 20),
            &[],
        )
        .await;
        assert_eq!(grown.code, 413, "{:?}", grown.body);
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn excess_requests_get_429_with_retry_after_except_watches_and_masters() {
    timed(async {
        let (server, _dir) = server(|c| {
            c.max_requests_inflight = 1;
            c.max_mutating_requests_inflight = 1;
        })
        .await;
        let path = "/api/v1/namespaces/default/configmaps";
        let someone = ["Impersonate-User: someone"];
        // The stalled request holds its permit while the server waits for the body (the
        // admin takes a free permit like anyone; only when none is free is it exempt).
        let _write = stalled_request(&server, "POST", path, &[]).await;
        tokio::time::sleep(Duration::from_millis(200)).await;

        let refused = request(&server, "POST", path, &configmap("c", 10), &someone).await;
        assert_eq!(refused.code, 429, "{:?}", refused.body);
        assert_eq!(refused.header("Retry-After"), Some("1"));
        assert_eq!(refused.body["reason"], "TooManyRequests");
        assert_eq!(
            refused.body["message"],
            "Too many requests, please try again later."
        );
        assert_eq!(refused.body["details"]["retryAfterSeconds"], 1);
        // Reads have their own limit (its 429 is covered by the filter's unit tests).
        let read = request(&server, "GET", path, b"", &someone).await;
        assert_eq!(read.code, 403);

        // A watch is long-running: never refused, never counted.
        let mut watch = TcpStream::connect(server.addr()).await.expect("connect");
        watch
            .write_all(&head(
                "GET",
                &format!("{path}?watch=true&timeoutSeconds=1"),
                None,
                &someone,
            ))
            .await
            .expect("watch");
        let watched = read_answer(&mut watch).await;
        assert_eq!(
            watched.code, 403,
            "impersonated users may not watch, but are not throttled"
        );
        // system:masters always get an answer.
        let admin = request(&server, "POST", path, &configmap("admin", 10), &[]).await;
        assert_eq!(admin.code, 201, "{:?}", admin.body);
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_request_that_does_not_finish_in_time_gets_504() {
    timed(async {
        let (server, _dir) = server(|c| c.request_timeout = Duration::from_millis(500)).await;
        // A slowloris body: the head and one byte, then nothing.
        let mut stalled = stalled_request(
            &server,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            &[],
        )
        .await;
        let answer = read_answer(&mut stalled).await;
        assert_eq!(answer.code, 504, "{:?}", answer.body);
        assert_eq!(answer.body["reason"], "Timeout");
        assert_eq!(
            answer.body["message"],
            "Timeout: request did not complete within the allotted timeout"
        );
        // A watch outlives the request timeout.
        let mut watch = TcpStream::connect(server.addr()).await.expect("connect");
        watch
            .write_all(&head(
                "GET",
                "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=2",
                None,
                &[],
            ))
            .await
            .expect("watch");
        let started = std::time::Instant::now();
        let watched = read_answer(&mut watch).await;
        assert_eq!(watched.code, 200);
        assert!(
            started.elapsed() >= Duration::from_millis(1500),
            "ended after {:?}",
            started.elapsed()
        );
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn silent_and_slowloris_connections_are_closed() {
    timed(async {
        let (server, _dir) = server(|c| c.header_read_timeout = Duration::from_millis(500)).await;
        // Connects and sends nothing.
        let mut silent = TcpStream::connect(server.addr()).await.expect("connect");
        // Sends part of a request head, then nothing.
        let mut partial = TcpStream::connect(server.addr()).await.expect("connect");
        partial
            .write_all(b"GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\n")
            .await
            .expect("partial head");
        for stream in [&mut silent, &mut partial] {
            let mut rest = Vec::new();
            let closed =
                tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut rest)).await;
            assert!(closed.is_ok(), "the connection is still open");
        }
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_watcher_that_never_reads_is_cut_off_without_hurting_others() {
    timed(async {
        let (server, _dir) = server(|c| c.write_stall_timeout = Duration::from_millis(500)).await;
        let watch_path = "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=30";
        let mut stuck = TcpStream::connect(server.addr()).await.expect("connect");
        stuck
            .write_all(&head("GET", watch_path, None, &[]))
            .await
            .expect("watch");
        let mut reader = TcpStream::connect(server.addr()).await.expect("connect");
        reader
            .write_all(&head("GET", watch_path, None, &[]))
            .await
            .expect("watch");
        let counter = tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut buf = vec![0u8; 1 << 16];
            loop {
                match reader.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
                if String::from_utf8_lossy(&seen).matches("\"ADDED\"").count() >= 60 {
                    break;
                }
            }
            String::from_utf8_lossy(&seen).matches("\"ADDED\"").count()
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        // 60 objects of 256 KiB: far more than the socket buffers of the stuck watcher hold.
        for i in 0..60 {
            let created = request(
                &server,
                "POST",
                "/api/v1/namespaces/default/configmaps",
                &configmap(&format!("cm-{i}"), 256 << 10),
                &[],
            )
            .await;
            assert_eq!(created.code, 201, "{:?}", created.body);
        }
        assert_eq!(
            counter.await.expect("reader"),
            60,
            "the reading watcher saw everything"
        );
        // The stuck watcher's connection was closed: reading it now reaches its end (or a
        // reset) instead of waiting for the watch's 30 s timeout.
        let mut rest = Vec::new();
        let closed =
            tokio::time::timeout(Duration::from_secs(15), stuck.read_to_end(&mut rest)).await;
        assert!(
            closed.is_ok(),
            "the stuck watcher's connection is still open"
        );
        let ok = request(
            &server,
            "GET",
            "/api/v1/namespaces/default/configmaps?limit=1",
            b"",
            &[],
        )
        .await;
        assert_eq!(ok.code, 200);
        server.shutdown().await;
    })
    .await;
}
