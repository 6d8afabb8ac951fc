//! A TCP proxy in front of the test database, so a test can take the store away from a
//! running coordinator: refuse new connections, and find the database sessions that go
//! through it (to terminate them on the server side).

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};

/// Forwards loopback connections to `upstream` while open; refused (accepted and closed at
/// once) while not. Dropping it stops accepting; forwarded connections end with their peers.
pub struct Proxy {
    pub addr: SocketAddr,
    open: Arc<AtomicBool>,
    upstream_ports: Arc<Mutex<HashSet<u16>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    pub async fn start(upstream: SocketAddr, open: bool) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let open = Arc::new(AtomicBool::new(open));
        let upstream_ports = Arc::new(Mutex::new(HashSet::new()));
        let task = tokio::spawn({
            let open = Arc::clone(&open);
            let ports = Arc::clone(&upstream_ports);
            async move {
                while let Ok((mut client, _)) = listener.accept().await {
                    if !open.load(Ordering::SeqCst) {
                        drop(client);
                        continue;
                    }
                    let ports = Arc::clone(&ports);
                    tokio::spawn(async move {
                        let Ok(mut server) = TcpStream::connect(upstream).await else {
                            return;
                        };
                        let port = server.local_addr().map(|a| a.port()).unwrap_or(0);
                        ports.lock().unwrap().insert(port);
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                        ports.lock().unwrap().remove(&port);
                    });
                }
            }
        });
        Proxy {
            addr,
            open,
            upstream_ports,
            task,
        }
    }

    /// Lets new connections through (true) or refuses them (false).
    pub fn set_open(&self, open: bool) {
        self.open.store(open, Ordering::SeqCst);
    }

    /// Local ports of the live upstream connections: `client_port` in `pg_stat_activity`.
    pub fn upstream_ports(&self) -> Vec<u16> {
        self.upstream_ports
            .lock()
            .unwrap()
            .iter()
            .copied()
            .collect()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
