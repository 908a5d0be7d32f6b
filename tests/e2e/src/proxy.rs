//! A loopback TCP forwarder a scenario can cut: what an outage of a server looks like to the
//! host (connections refused from then on, the open ones reset), without stopping the server
//! the other suites share.

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// Forwards every connection made to [`Proxy::addr`] to its target, until cut.
pub struct Proxy {
    /// `127.0.0.1:<port>`, where the proxy listens.
    pub addr: String,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `target` (`host:port`).
    pub async fn start(target: &str) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?.to_string();
        let target = target.to_owned();
        let task = tokio::spawn(async move {
            // Dropped with the task when cut: every open connection ends with it.
            let mut connections = JoinSet::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                let target = target.clone();
                connections.spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Ok(Self { addr, task })
    }

    /// Cuts it: the port refuses connections from now on, and the open ones are closed.
    pub async fn cut(mut self) {
        self.task.abort();
        // The abort itself is its outcome; when it returns, the listener is closed.
        let _ = (&mut self.task).await;
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
