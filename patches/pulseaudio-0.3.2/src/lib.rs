//! A pure Rust implementation of the PulseAudio protocol, suitable for writing
//! servers and clients.

#![warn(
    anonymous_parameters,
    missing_copy_implementations,
    missing_debug_implementations,
    missing_docs,
    nonstandard_style,
    rust_2018_idioms,
    single_use_lifetimes,
    trivial_casts,
    trivial_numeric_casts,
    unreachable_pub,
    unused_extern_crates,
    unused_qualifications,
    variant_size_differences
)]

use std::path::PathBuf;

mod client;
pub mod protocol;
pub use client::*;

/// Attempts to determine the socket path from the runtime environment, where
/// libpulse looks for it:
///   - $PULSE_SERVER (its `unix:` entries only, when it is set)
///   - $PULSE_RUNTIME_PATH/native (and, as this crate read it, .../pulse/native)
///   - $XDG_RUNTIME_DIR/pulse/native
///   - without $XDG_RUNTIME_DIR: the per-user runtime directory in the config
///     home, `$XDG_CONFIG_HOME/pulse/<machine-id>-runtime/native` (or under
///     `~/.config`), where `pulseaudio --start` puts it as root or in a
///     container (a link to /tmp/pulse-*)
///   - the system instance's /run/pulse/native and /var/run/pulse/native
///
/// Returns None if no socket can be found or if $PULSE_SERVER names only
/// remote servers, i.e. entries with a prefix other than 'unix:'.
pub fn socket_path_from_env() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(server) = var("PULSE_SERVER") {
        let server = server.to_string_lossy().into_owned();
        return server
            .split_whitespace()
            .filter_map(|entry| entry.strip_prefix("unix:"))
            .map(PathBuf::from)
            .find(|path| usable_socket(path));
    }
    let mut paths = Vec::new();
    if let Some(runtime) = var("PULSE_RUNTIME_PATH") {
        let runtime = PathBuf::from(runtime);
        paths.push(runtime.join("native"));
        paths.push(runtime.join("pulse/native"));
    }
    if let Some(runtime) = var("XDG_RUNTIME_DIR") {
        paths.push(PathBuf::from(runtime).join("pulse/native"));
    } else if let Some(machine) = machine_id() {
        #[allow(deprecated)]
        let config_home = var("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::home_dir().map(|home| home.join(".config")));
        if let Some(config_home) = config_home {
            paths.push(
                config_home
                    .join("pulse")
                    .join(format!("{machine}-runtime"))
                    .join("native"),
            );
        }
    }
    paths.push(PathBuf::from("/run/pulse/native"));
    paths.push(PathBuf::from("/var/run/pulse/native"));
    paths.into_iter().find(|path| usable_socket(path))
}

/// A socket there that this process may write to.
fn usable_socket(path: &std::path::Path) -> bool {
    use std::os::unix::fs::FileTypeExt as _;
    std::fs::metadata(path)
        .is_ok_and(|stat| stat.file_type().is_socket() && !stat.permissions().readonly())
}

/// The machine's id as libpulse names the runtime directory after it: the
/// systemd or D-Bus machine id, else the host name.
fn machine_id() -> Option<String> {
    ["/etc/machine-id", "/var/lib/dbus/machine-id", "/proc/sys/kernel/hostname"]
        .iter()
        .find_map(|path| {
            use std::io::Read as _;
            let mut text = String::new();
            std::fs::File::open(path)
                .ok()?
                .take(256)
                .read_to_string(&mut text)
                .ok()?;
            let id = text.trim();
            (!id.is_empty() && !id.contains('/')).then(|| id.to_owned())
        })
}

/// Attempts to find the authentication cookie from the environment, checking
/// the following locations in order:
///
///   - $PULSE_COOKIE
///   - $HOME/.config/pulse/cookie
///   - $HOME/.pulse-cookie
pub fn cookie_path_from_env() -> Option<PathBuf> {
    #[allow(deprecated)]
    let home = std::env::home_dir()?;

    let mut paths = std::env::var("PULSE_COOKIE")
        .ok()
        .map(PathBuf::from)
        .into_iter()
        .chain(std::iter::once(home.join(".config/pulse/cookie")))
        .chain(std::iter::once(home.join(".pulse-cookie")));

    paths.find(|path| path.exists())
}

#[cfg(test)]
#[cfg(feature = "_integration-tests")]
mod integration_test_util {
    use std::{ffi::CString, io::BufReader, os::unix::net::UnixStream};

    use anyhow::Context;

    use super::*;
    use crate::protocol::*;

    #[test]
    fn socket_path() -> anyhow::Result<()> {
        let path = socket_path_from_env();
        assert!(path.is_some());
        assert!(path.unwrap().exists());

        Ok(())
    }

    pub(crate) fn connect_to_server() -> anyhow::Result<BufReader<UnixStream>> {
        let socket_path = socket_path_from_env().context("error finding pulse socket")?;
        let sock = UnixStream::connect(socket_path).context("error connecting to pulse socket")?;

        Ok(BufReader::new(sock))
    }

    pub(crate) fn init_client(mut sock: &mut BufReader<UnixStream>) -> anyhow::Result<u16> {
        let cookie = cookie_path_from_env()
            .and_then(|path| std::fs::read(path).ok())
            .unwrap_or_default();
        if cookie.is_empty() {
            eprintln!("warning: no pulseaudio cookie found");
        }

        let auth = AuthParams {
            version: MAX_VERSION,
            supports_shm: false,
            supports_memfd: false,
            cookie,
        };

        write_command_message(sock.get_mut(), 0, &Command::Auth(auth), MAX_VERSION)
            .context("sending auth command failed")?;
        let (_, auth_reply) =
            read_reply_message::<AuthReply>(sock, MAX_VERSION).context("auth command failed")?;

        let protocol_version = std::cmp::min(MAX_VERSION, auth_reply.version);

        let mut props = Props::new();
        props.set(Prop::ApplicationName, CString::new("pulseaudio-rs-tests")?);
        write_command_message(
            sock.get_mut(),
            1,
            &Command::SetClientName(props),
            protocol_version,
        )
        .context("sending set_client_name command failed")?;
        let _ = read_reply_message::<SetClientNameReply>(&mut sock, protocol_version)
            .context("set_client_name command failed")?;

        Ok(protocol_version)
    }

    pub(crate) fn connect_and_init() -> anyhow::Result<(BufReader<UnixStream>, u16)> {
        let mut sock = connect_to_server()?;
        let protocol_version = init_client(&mut sock)?;

        Ok((sock, protocol_version))
    }
}
