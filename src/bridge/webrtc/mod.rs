//! The bridge's WebRTC media transport: the app's audio track beside its WebSocket. One UDP
//! port carries every peer connection (a socket per announced address, all on that port);
//! a router task per socket hands each datagram to its peer, found by the remote address once
//! known and, before that, by the ICE username of the peer's first STUN request. Each peer
//! connection is one tokio task around str0m's sans-IO `Rtc` (`peer.rs`); the session loop
//! holds its [`MediaPeer`] and drops it to tear it down. Signalling (the offer, the answer,
//! trickled candidates) stays on the WebSocket; what it may contain is checked in
//! `signal.rs`.

mod peer;
pub mod signal;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use str0m::ice::StunMessage;
use str0m::media::{Direction, MediaKind};
use str0m::{Candidate, Rtc, RtcConfig};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};
use tracing::{Instrument as _, debug};

pub use peer::PeerEvent;
use peer::{Command, PeerTask, Role};

/// How the bridge's WebRTC transport runs (`livetalk serve --webrtc-ip/--webrtc-port`).
#[derive(Debug, Clone)]
pub struct WebRtcOptions {
    /// The address announced in the host candidates instead of the bound one (behind NAT, in
    /// a container).
    pub announce_ip: Option<IpAddr>,
    /// The UDP port every peer connection shares; 0 picks a free one at start.
    pub port: u16,
    /// Peer connections held at once across the bridge.
    pub max_peers: usize,
    /// Time from the answer to a connected peer (ICE and DTLS) before it is given up.
    pub connect_timeout: Duration,
    /// Model audio queued for the track, at most (it arrives faster than real time).
    pub max_buffered: Duration,
}

impl Default for WebRtcOptions {
    fn default() -> Self {
        WebRtcOptions {
            announce_ip: None,
            port: 0,
            max_peers: 64,
            connect_timeout: Duration::from_secs(10),
            max_buffered: Duration::from_secs(60),
        }
    }
}

/// One datagram for a peer, stamped when it was read.
struct Datagram {
    at: Instant,
    source: SocketAddr,
    /// The announced address it came in on (what str0m knows the local candidate by).
    destination: SocketAddr,
    data: Vec<u8>,
}

/// Datagrams queued for one peer before the router drops them (UDP may lose them anyway):
/// about a second of audio with its RTCP.
const PEER_QUEUE: usize = 128;
/// Remote addresses one peer may be reached from (its candidates that ICE tries).
const MAX_ADDRESSES_PER_PEER: usize = 8;
/// The largest datagram read (str0m's MTU is 1,150; room for a peer's larger ones).
const MAX_DATAGRAM: usize = 2048;

#[derive(Default)]
struct Routes {
    next_id: u64,
    peers: HashMap<u64, PeerRoute>,
    by_address: HashMap<SocketAddr, u64>,
}

struct PeerRoute {
    ufrag: String,
    datagrams: mpsc::Sender<Datagram>,
    addresses: Vec<SocketAddr>,
}

impl Routes {
    /// The peer a datagram from `source` is for: by its address, or, for a STUN binding
    /// request from a new address, by the ICE username (`ours:theirs`), which str0m then
    /// checks with the password.
    fn route(&mut self, source: SocketAddr, data: &[u8]) -> Option<&mpsc::Sender<Datagram>> {
        let id = match self.by_address.get(&source) {
            Some(id) => *id,
            None => {
                let stun = StunMessage::parse(data).ok()?;
                if !stun.is_binding_request() {
                    return None;
                }
                let (ours, _) = stun.split_username()?;
                let (id, route) = self.peers.iter_mut().find(|(_, r)| r.ufrag == ours)?;
                if route.addresses.len() >= MAX_ADDRESSES_PER_PEER {
                    return None;
                }
                route.addresses.push(source);
                self.by_address.insert(source, *id);
                *id
            }
        };
        self.peers.get(&id).map(|route| &route.datagrams)
    }

    fn remove(&mut self, id: u64) {
        if let Some(route) = self.peers.remove(&id) {
            for address in route.addresses {
                self.by_address.remove(&address);
            }
        }
    }
}

/// A socket and the address announced for it.
struct Local {
    socket: Arc<UdpSocket>,
    announced: SocketAddr,
}

/// The bridge's WebRTC side: its UDP port and the peer connections on it. The routers stop
/// when it is dropped.
pub struct MediaHub {
    locals: Vec<Local>,
    routes: Arc<Mutex<Routes>>,
    options: WebRtcOptions,
    _stop: watch::Sender<()>,
}

impl MediaHub {
    /// Binds the UDP port on `listen_ip` (on each interface's address when it is unspecified)
    /// and starts a router per socket.
    pub async fn bind(listen_ip: IpAddr, options: WebRtcOptions) -> anyhow::Result<MediaHub> {
        let ips = if listen_ip.is_unspecified() {
            interface_addresses(listen_ip.is_ipv4())
        } else {
            vec![listen_ip]
        };
        anyhow::ensure!(
            !ips.is_empty(),
            "no network interface has an address to announce for WebRTC: pass --webrtc-ip"
        );
        let mut port = options.port;
        let mut locals = Vec::new();
        for ip in ips {
            let socket = UdpSocket::bind(SocketAddr::new(ip, port))
                .await
                .with_context(|| {
                    format!("cannot bind the WebRTC UDP port {port} on {ip} (--webrtc-port)")
                })?;
            let bound = socket.local_addr()?;
            port = bound.port();
            let announced = SocketAddr::new(options.announce_ip.unwrap_or(ip), port);
            locals.push(Local {
                socket: Arc::new(socket),
                announced,
            });
        }
        let routes = Arc::new(Mutex::new(Routes::default()));
        let (stop, stopped) = watch::channel(());
        for local in &locals {
            tokio::spawn(route_datagrams(
                local.socket.clone(),
                local.announced,
                routes.clone(),
                stopped.clone(),
            ));
        }
        debug!(port, "WebRTC transport ready");
        Ok(MediaHub {
            locals,
            routes,
            options,
            _stop: stop,
        })
    }

    /// The UDP port every peer connection uses.
    pub fn port(&self) -> u16 {
        self.locals.first().map_or(0, |l| l.announced.port())
    }

    /// Answers an offer with a new peer connection: the answer's SDP and the peer, or the
    /// sentence saying why not.
    pub fn open(&self, offer: &str) -> Result<(String, MediaPeer), String> {
        let offer = signal::offer(offer)?;
        let now = Instant::now();
        let mut rtc = self.rtc(now)?;
        let answer = signal::guarded(
            || rtc.sdp_api().accept_offer(offer),
            "The WebRTC offer could not be answered.",
        )?
        .map_err(|e| {
            debug!("WebRTC offer refused: {e}");
            "The WebRTC offer could not be answered: it must offer an Opus audio track (and may add a data channel) with ICE credentials and a DTLS fingerprint, as a browser's createOffer does.".to_owned()
        })?;
        let peer = self.start(rtc, now, Role::Answerer)?;
        Ok((answer.to_sdp_string(), peer))
    }

    /// Offers a peer connection (`livetalk --bridge-transport webrtc`): one send-and-receive
    /// Opus audio track, this hub's host candidates in the offer. The peer waits for
    /// [`MediaPeer::answer`]; its connect deadline runs from now.
    pub fn offer(&self) -> Result<(String, MediaPeer), String> {
        let now = Instant::now();
        let mut rtc = self.rtc(now)?;
        let mut changes = rtc.sdp_api();
        let mid = changes.add_media(MediaKind::Audio, Direction::SendRecv, None, None, None);
        let (offer, pending) = changes
            .apply()
            .ok_or_else(|| "The WebRTC offer could not be made.".to_owned())?;
        let peer = self.start(
            rtc,
            now,
            Role::Offerer {
                pending: Some(pending),
                mid,
            },
        )?;
        Ok((offer.to_sdp_string(), peer))
    }

    /// A peer connection for Opus audio, with this hub's host candidates.
    fn rtc(&self, now: Instant) -> Result<Rtc, String> {
        let mut rtc = RtcConfig::new()
            .clear_codecs()
            .enable_opus(true, false)
            .build(now);
        for local in &self.locals {
            let candidate = Candidate::host(local.announced, "udp").map_err(|e| {
                format!(
                    "The WebRTC transport cannot announce {}: {e}",
                    local.announced
                )
            })?;
            rtc.add_local_candidate(candidate);
        }
        Ok(rtc)
    }

    /// Routes datagrams to a new peer and starts its task.
    fn start(&self, mut rtc: Rtc, now: Instant, role: Role) -> Result<MediaPeer, String> {
        let ufrag = rtc.direct_api().local_ice_credentials().ufrag;
        let mut routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        if routes.peers.len() >= self.options.max_peers {
            return Err(format!(
                "This bridge already carries {} WebRTC connections, its limit; the offer was not answered. Audio can still go over the WebSocket (SEND_REALTIME_INPUT, AUDIO_CHUNK).",
                self.options.max_peers
            ));
        }
        let (datagram_tx, datagrams) = mpsc::channel(PEER_QUEUE);
        let id = routes.next_id;
        routes.next_id += 1;
        routes.peers.insert(
            id,
            PeerRoute {
                ufrag,
                datagrams: datagram_tx,
                addresses: Vec::new(),
            },
        );
        drop(routes);
        let (commands_tx, commands) = mpsc::channel(peer::COMMAND_QUEUE);
        let (events_tx, events) = mpsc::channel(peer::EVENT_QUEUE);
        let sockets = self
            .locals
            .iter()
            .map(|l| (l.announced, l.socket.clone()))
            .collect();
        let flushes = Arc::new(AtomicU64::new(0));
        let task = PeerTask::new(
            rtc,
            role,
            flushes.clone(),
            sockets,
            datagrams,
            commands,
            events_tx,
            &self.options,
            now,
            RouteGuard {
                id,
                routes: self.routes.clone(),
            },
        )?;
        let task = tokio::spawn(task.run().in_current_span());
        Ok(MediaPeer {
            commands: commands_tx,
            flushes,
            events,
            task,
        })
    }
}

/// Takes a peer's routes away when its task ends, however it ends.
struct RouteGuard {
    id: u64,
    routes: Arc<Mutex<Routes>>,
}

impl RouteGuard {
    /// Datagrams from `address` are this peer's from now on: the offerer's router learns the
    /// answerer's addresses from its candidates, as its replies to our checks carry no
    /// username to route them by. Only the offering side does this: its hub holds one peer,
    /// while on the bridge an app could otherwise claim another app's address.
    fn allow(&self, address: SocketAddr) {
        let mut routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        let routes = &mut *routes;
        if let Some(route) = routes.peers.get_mut(&self.id)
            && !route.addresses.contains(&address)
            && route.addresses.len() < MAX_ADDRESSES_PER_PEER
        {
            route.addresses.push(address);
            routes.by_address.insert(address, self.id);
        }
    }
}

impl Drop for RouteGuard {
    fn drop(&mut self) {
        self.routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(self.id);
    }
}

/// Reads one socket and hands each datagram to its peer, until the hub is dropped.
async fn route_datagrams(
    socket: Arc<UdpSocket>,
    announced: SocketAddr,
    routes: Arc<Mutex<Routes>>,
    mut stop: watch::Receiver<()>,
) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        let (len, source) = tokio::select! {
            _ = stop.changed() => return,
            read = socket.recv_from(&mut buf) => match read {
                Ok(read) => read,
                // An ICMP "port unreachable" from a peer that left, on some systems: not ours
                // to end on.
                Err(e) => {
                    debug!("WebRTC socket read: {e}");
                    continue;
                }
            },
        };
        let data = &buf[..len];
        let mut routes = routes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(peer) = routes.route(source, data) {
            let _ = peer.try_send(Datagram {
                at: Instant::now(),
                source,
                destination: announced,
                data: data.to_vec(),
            });
        }
    }
}

/// The addresses of this machine's interfaces of one family (loopback included, link-local
/// IPv6 left out: it needs a scope a host candidate cannot carry).
fn interface_addresses(ipv4: bool) -> Vec<IpAddr> {
    let Ok(addresses) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    let mut ips: Vec<IpAddr> = addresses
        .filter_map(|a| a.address)
        .filter_map(|a| {
            if ipv4 {
                a.as_sockaddr_in().map(|s| IpAddr::V4(s.ip()))
            } else {
                a.as_sockaddr_in6()
                    .map(|s| IpAddr::V6(s.ip()))
                    .filter(|ip| !matches!(ip, IpAddr::V6(v6) if v6.is_unicast_link_local()))
            }
        })
        .collect();
    ips.sort();
    ips.dedup();
    ips
}

/// One app's peer connection, as its session loop holds it: what to play on the track and
/// the candidates to add go in, what the track heard and how it is going come out. Dropping
/// it ends the peer connection.
pub struct MediaPeer {
    commands: mpsc::Sender<Command>,
    /// Bumped by each barge-in: the peer drops what it queued under an older one, so a flush
    /// works even when the command queue is full.
    flushes: Arc<AtomicU64>,
    events: mpsc::Receiver<PeerEvent>,
    task: tokio::task::JoinHandle<()>,
}

impl MediaPeer {
    /// What the peer connection did next; `None` once it has ended.
    pub async fn next(&mut self) -> Option<PeerEvent> {
        self.events.recv().await
    }

    /// One more remote candidate.
    pub fn add_candidate(&self, candidate: Candidate) {
        self.command(Command::Candidate(candidate));
    }

    /// The far end's answer to this peer's [`MediaHub::offer`], checked here (the sentence
    /// when it cannot be used); the peer connects with it.
    pub fn answer(&self, sdp: &str) -> Result<(), String> {
        let (answer, addresses) = signal::answer(sdp)?;
        self.command(Command::Answer {
            answer: Box::new(answer),
            addresses,
        });
        Ok(())
    }

    /// Audio for the track, 16-bit mono PCM at the rate this end sends: the model's 24 kHz
    /// on the bridge, the microphone's 16 kHz on the offering client.
    pub fn play(&self, pcm: Vec<u8>) {
        let epoch = self.flushes.load(Ordering::Acquire);
        self.command(Command::Play { pcm, epoch });
    }

    /// The model's turn is over: the track stops speaking once what is queued has played.
    pub fn turn_end(&self) {
        self.command(Command::TurnEnd);
    }

    /// Barge-in: drop what is queued and stop at once.
    pub fn flush(&self) {
        self.flushes.fetch_add(1, Ordering::AcqRel);
        self.command(Command::Flush);
    }

    fn command(&self, command: Command) {
        if self.commands.try_send(command).is_err() {
            debug!("WebRTC peer busy or gone: a command was dropped");
        }
    }
}

impl Drop for MediaPeer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
