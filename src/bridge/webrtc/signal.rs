//! The app's WebRTC signalling, checked before str0m sees it: the bounds on an offer and on
//! each candidate, and what is wrong with them in the app's words. str0m parses; this file
//! only refuses what is too large, empty or of a kind the bridge cannot use, and keeps a
//! parser's failure (or, defensively, its panic) from reaching anyone as a library's words.

use std::panic::{AssertUnwindSafe, catch_unwind};

use str0m::Candidate;
use str0m::change::{SdpAnswer, SdpOffer};
use str0m::net::Protocol;

use crate::bridge::protocol::IceCandidate;

/// The largest offer read: a browser's offer with audio, video and a data channel is 5–10 KB.
pub const MAX_OFFER_BYTES: usize = 64 * 1024;
/// The largest candidate line read: real ones are about 100 bytes.
pub const MAX_CANDIDATE_BYTES: usize = 1024;
/// Candidates taken per peer connection (each is a pair ICE may check).
pub const MAX_CANDIDATES: usize = 32;

/// The offer, read: it must be a session description with an audio section.
pub fn offer(sdp: &str) -> Result<SdpOffer, String> {
    if sdp.len() > MAX_OFFER_BYTES {
        return Err(format!(
            "The WebRTC offer of {} bytes is larger than the {MAX_OFFER_BYTES} bytes this bridge reads; it was not answered.",
            sdp.len()
        ));
    }
    if sdp.trim().is_empty() {
        return Err("The WebRTC offer has no session description (`sdp` is empty).".into());
    }
    if !sdp
        .lines()
        .any(|line| line.trim_start().starts_with("m=audio"))
    {
        return Err("The WebRTC offer has no audio track (no `m=audio` section): this bridge carries the microphone and the model's voice, so offer one Opus audio track.".into());
    }
    // Without Opus there is no codec both ends speak: answering would connect a silent track.
    if !sdp.lines().any(|line| {
        line.trim_start()
            .strip_prefix("a=rtpmap:")
            .and_then(|map| map.split_whitespace().nth(1))
            .is_some_and(|codec| codec.to_ascii_lowercase().starts_with("opus/"))
    }) {
        return Err("The WebRTC offer's audio track offers no Opus (none of its `a=rtpmap` lines names opus/48000): this bridge sends and hears Opus, so offer it as a browser's createOffer does. It was not answered.".into());
    }
    match catch_unwind(|| SdpOffer::from_sdp_string(sdp)) {
        Ok(Ok(offer)) => Ok(offer),
        Ok(Err(e)) => {
            tracing::debug!("unreadable WebRTC offer: {e}");
            Err(unreadable())
        }
        Err(_) => Err(unreadable()),
    }
}

/// The answer to our offer (`livetalk --bridge-transport webrtc`), read, with the addresses
/// of the candidates it carries (the router takes datagrams from them).
pub fn answer(sdp: &str) -> Result<(SdpAnswer, Vec<std::net::SocketAddr>), String> {
    if sdp.len() > MAX_OFFER_BYTES {
        return Err(format!(
            "The bridge's WebRTC answer of {} bytes is larger than the {MAX_OFFER_BYTES} bytes read; the session goes on over the WebSocket.",
            sdp.len()
        ));
    }
    let unusable = || {
        "The bridge's WebRTC answer is not a session description livetalk can read; the session goes on over the WebSocket.".to_owned()
    };
    let answer = match catch_unwind(|| SdpAnswer::from_sdp_string(sdp)) {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => {
            tracing::debug!("unreadable WebRTC answer: {e}");
            return Err(unusable());
        }
        Err(_) => return Err(unusable()),
    };
    let addresses = sdp
        .lines()
        .filter_map(|line| line.trim().strip_prefix("a="))
        .filter(|line| line.starts_with("candidate:"))
        .take(MAX_CANDIDATES)
        .filter_map(|line| {
            let line = IceCandidate {
                candidate: line.to_owned(),
                sdp_mid: None,
                sdp_m_line_index: None,
            };
            candidate(&line).ok().flatten().map(|c| c.addr())
        })
        .collect();
    Ok((answer, addresses))
}

fn unreadable() -> String {
    "The WebRTC offer is not a session description this bridge can read (RFC 8866 SDP, as a browser's createOffer makes it); it was not answered.".into()
}

/// Runs one of str0m's steps on input from outside, turning a panic into the app's sentence
/// (str0m is not known to panic on bad input; an app must not be able to find out).
pub fn guarded<T>(step: impl FnOnce() -> T, sentence: &str) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(step)).map_err(|_| sentence.to_owned())
}

/// One trickled candidate: `Ok(None)` for the end of candidates (an empty one), which needs
/// nothing done.
pub fn candidate(candidate: &IceCandidate) -> Result<Option<Candidate>, String> {
    let line = candidate.candidate.trim();
    if line.is_empty() {
        return Ok(None);
    }
    if line.len() > MAX_CANDIDATE_BYTES {
        return Err(format!(
            "The ICE candidate of {} bytes is larger than the {MAX_CANDIDATE_BYTES} bytes this bridge reads; it was ignored.",
            line.len()
        ));
    }
    let line = line.strip_prefix("a=").unwrap_or(line);
    if !line.starts_with("candidate:") {
        return Err(format!(
            "The ICE candidate must be a `candidate:…` line (RFC 8839), not {:?}; it was ignored.",
            livetalk_live::excerpt::bounded(line, 60)
        ));
    }
    let parsed = match catch_unwind(|| Candidate::from_sdp_string(line)) {
        Ok(Ok(parsed)) => parsed,
        Ok(Err(e)) => {
            tracing::debug!("unreadable ICE candidate: {e}");
            let why = if line.split_whitespace().any(|w| w.ends_with(".local")) {
                " (an mDNS `.local` address, which this bridge does not resolve: allow the app's real addresses)"
            } else {
                ""
            };
            return Err(format!(
                "The ICE candidate could not be read{why}; it was ignored."
            ));
        }
        Err(_) => return Err("The ICE candidate could not be read; it was ignored.".into()),
    };
    if parsed.proto() != Protocol::Udp {
        return Err(
            "The ICE candidate is not a UDP one, which is all this bridge speaks; it was ignored."
                .into(),
        );
    }
    Ok(Some(parsed))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What aiortc 1.x offers: one Opus audio track and a data channel.
    pub(crate) const OFFER: &str = "v=0\r\no=- 3970000000 3970000000 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0 1\r\na=msid-semantic:WMS *\r\nm=audio 9 UDP/TLS/RTP/SAVPF 96 0 8\r\nc=IN IP4 0.0.0.0\r\na=sendrecv\r\na=extmap:1 urn:ietf:params:rtp-hdrext:sdes:mid\r\na=mid:0\r\na=msid:a b\r\na=rtcp:9 IN IP4 0.0.0.0\r\na=rtcp-mux\r\na=ssrc:1 cname:x\r\na=rtpmap:96 opus/48000/2\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:8 PCMA/8000\r\na=ice-ufrag:abcd\r\na=ice-pwd:abcdefghijklmnopqrstuv\r\na=fingerprint:sha-256 6B:8B:F0:65:5F:78:E2:51:3B:AC:6F:F3:3F:46:1B:35:DC:B8:5F:64:1A:24:C2:43:F0:A1:58:D0:A1:2C:19:08\r\na=setup:actpass\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\na=mid:1\r\na=sctp-port:5000\r\na=max-message-size:65536\r\na=ice-ufrag:abcd\r\na=ice-pwd:abcdefghijklmnopqrstuv\r\na=fingerprint:sha-256 6B:8B:F0:65:5F:78:E2:51:3B:AC:6F:F3:3F:46:1B:35:DC:B8:5F:64:1A:24:C2:43:F0:A1:58:D0:A1:2C:19:08\r\na=setup:actpass\r\n";

    #[test]
    fn a_real_offer_is_read() {
        assert!(offer(OFFER).is_ok());
    }

    #[test]
    fn garbage_huge_and_empty_offers_are_refused_in_words() {
        let huge = format!("{OFFER}{}", "a=x\r\n".repeat(MAX_OFFER_BYTES / 4));
        let no_opus = OFFER.replace("a=rtpmap:96 opus/48000/2\r\n", "");
        let cases = [
            ("", "no session description"),
            ("   ", "no session description"),
            ("hello", "no audio track"),
            ("v=0\r\nm=video 9 UDP 96\r\n", "no audio track"),
            ("m=audio\u{0}\u{ff}", "offers no Opus"),
            (no_opus.as_str(), "offers no Opus"),
            (
                "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 96\r\na=rtpmap:96 opus/4800000000000000/2\r\n",
                "bridge can read",
            ),
            (huge.as_str(), "larger than"),
        ];
        for (sdp, expected) in cases {
            let error = offer(sdp).expect_err(sdp);
            assert!(error.contains(expected), "{sdp:?}: {error}");
            assert!(
                !error.contains("SdpError") && !error.contains("str0m"),
                "{error}"
            );
        }
        // Every prefix and a few mutations of a real offer: an answer or a sentence, never a
        // panic.
        for end in (0..OFFER.len()).step_by(7) {
            let _ = offer(&OFFER[..end]);
        }
        for (from, to) in [
            ("96", "999999"),
            ("opus", ""),
            (":", ""),
            ("\r\n", "\n"),
            ("9", "-1"),
        ] {
            let _ = offer(&OFFER.replace(from, to));
        }
    }

    fn line(text: &str) -> IceCandidate {
        IceCandidate {
            candidate: text.into(),
            sdp_mid: Some("0".into()),
            sdp_m_line_index: Some(0),
        }
    }

    #[test]
    fn candidates_are_read_or_refused_in_words() {
        let good = "candidate:1 1 udp 2130706431 127.0.0.1 50000 typ host";
        assert!(candidate(&line(good)).unwrap().is_some());
        assert!(candidate(&line(&format!("a={good}"))).unwrap().is_some());
        assert!(candidate(&line("")).unwrap().is_none());
        let cases = [
            ("hello", "must be a `candidate:"),
            ("candidate:1", "could not be read"),
            (
                "candidate:1 1 udp x 127.0.0.1 50000 typ host",
                "could not be read",
            ),
            (
                "candidate:1 1 udp 1 999.0.0.1 50000 typ host",
                "could not be read",
            ),
            (
                "candidate:1 1 udp 1 127.0.0.1 99999 typ host",
                "could not be read",
            ),
            ("candidate:1 1 udp 1 abc.local 50000 typ host", "mDNS"),
            (
                "candidate:1 1 tcp 1 127.0.0.1 9 typ host tcptype active",
                "not a UDP",
            ),
        ];
        for (text, expected) in cases {
            let error = candidate(&line(text)).expect_err(text);
            assert!(error.contains(expected), "{text}: {error}");
        }
        let huge = format!("candidate:{}", "1 ".repeat(MAX_CANDIDATE_BYTES));
        assert!(candidate(&line(&huge)).unwrap_err().contains("larger than"));
    }
}
