//! One TCP connection across the simulated wire: node 0 connects from its address (.1
//! in the sim's family) to a listener at .2 port 80 on node 1, sends a stream and closes; node 1 reads to the
//! end and closes too. Both nodes need TCP set up (`Interface::set_tcp`).

use ulnet_stack::tcp::{RecvError, SocketHandle, State};
use ulnet_stack::time::Duration;

use super::Sim;

/// A test stream of `len` bytes whose pattern repeats only every 64,256 bytes (251 x
/// 256), so a segment stored at the wrong offset shows.
pub fn stream(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i / 251) as u8)
        .collect()
}

/// What [`transfer`] saw by the time it returned.
pub struct Transfer {
    /// The server read to the end of the stream (EOF) within the time limit.
    pub done: bool,
    /// What the server read.
    pub received: Vec<u8>,
    pub client: SocketHandle,
    pub server: Option<SocketHandle>,
}

/// Sends `data` from node 0 to node 1 as above, for at most `limit` of virtual time.
/// The client closes once the handshake is done and everything is queued (RFC 9293
/// §3.10.4: CLOSE in SYN-SENT deletes the connection); the server closes at EOF.
pub fn transfer(sim: &mut Sim, data: &[u8], limit: Duration) -> Transfer {
    let family = sim.family;
    let listener = sim
        .iface(1)
        .tcp_mut()
        .unwrap()
        .listen(family.sa(2, 80), 4)
        .unwrap();
    let now = sim.now();
    let (from, to) = (family.sa(1, 0), family.sa(2, 80));
    let client = sim
        .iface(0)
        .tcp_mut()
        .unwrap()
        .connect(now, from, to)
        .unwrap();
    let mut sent = 0;
    let mut server = None;
    let mut received = Vec::with_capacity(data.len());
    let mut eof = false;
    let mut closed = false;
    let mut buf = vec![0u8; 16 * 1024];
    let end = sim.now() + limit;
    let done = sim.run_until(end, |sim| {
        let now = sim.now();
        let tcp = sim.iface(0).tcp_mut().unwrap();
        while sent < data.len() {
            match tcp.send(now, client, &data[sent..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => sent += n,
            }
        }
        if sent == data.len() && !closed && tcp.state(client) == Ok(State::Established) {
            tcp.close(now, client).unwrap();
            closed = true;
        }
        let tcp = sim.iface(1).tcp_mut().unwrap();
        if server.is_none() {
            server = tcp.accept(now, listener).unwrap();
        }
        if let Some(s) = server {
            loop {
                match tcp.recv(now, s, &mut buf) {
                    Ok(0) => {
                        eof = true;
                        let _ = tcp.close(now, s);
                        break;
                    }
                    Ok(n) => received.extend_from_slice(&buf[..n]),
                    Err(RecvError::WouldBlock) => break,
                    Err(e) => panic!("recv: {e:?}"),
                }
            }
        }
        eof
    });
    Transfer {
        done,
        received,
        client,
        server,
    }
}
