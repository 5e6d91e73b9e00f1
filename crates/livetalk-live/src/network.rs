//! What the network asks of every connection livetalk opens, read from the environment once:
//! the certificates trusted (the operating system's store, or `SSL_CERT_FILE` /
//! `SSL_CERT_DIR` when set, together with the bundled web roots) in the one TLS client
//! configuration, and the proxy. The WebSocket dial and the token requests both use it, so a
//! company's TLS-inspecting proxy and its CA work the same for both.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tracing::{info, warn};

use crate::file::FileKind;

use super::proxy::Proxy;

/// The TLS settings and the proxy of this process.
#[derive(Debug)]
pub(crate) struct Network {
    /// Built at the first TLS connection: reading a certificate folder is a few hundred file
    /// reads that a loopback session (the offline demo model, the tests) never needs.
    trust: OnceLock<(Arc<rustls::ClientConfig>, Vec<String>)>,
    /// `None` when no proxy variable is set.
    pub(crate) proxy: Option<Proxy>,
}

impl Network {
    /// The client TLS settings.
    pub(crate) fn tls(&self) -> &Arc<rustls::ClientConfig> {
        &self.trust.get_or_init(tls_config).0
    }

    /// Why certificates from the system store or `SSL_CERT_FILE` / `SSL_CERT_DIR` could not
    /// be read (empty when all were), for the message of a certificate that is not trusted.
    pub(crate) fn trust_problems(&self) -> &[String] {
        &self.trust.get_or_init(tls_config).1
    }
}

/// This process's network settings, read at first use; an unusable proxy variable is an error
/// every connection reports (never a silent direct connection).
pub(crate) fn network() -> Result<&'static Network, String> {
    static NETWORK: OnceLock<Result<Network, String>> = OnceLock::new();
    NETWORK
        .get_or_init(|| {
            let proxy = Proxy::from_env(&|name| std::env::var(name).ok())?;
            if let Some(proxy) = &proxy {
                info!(proxy = %proxy.address, from = proxy.var, "connections go through a proxy");
            }
            Ok(Network {
                trust: OnceLock::new(),
                proxy,
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// What this process's connections go through, in words for people (`livetalk doctor`).
/// Never a secret: a proxy's user and password are not part of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkReport {
    /// The proxy and the variable that named it, e.g. `proxy.corp.example:3128 (HTTPS_PROXY)`;
    /// `None` when connections go direct.
    pub proxy: Option<String>,
    /// Where the trusted certificates come from besides the bundled web roots.
    pub trust: String,
    /// Why some of those certificates could not be read (empty when all were).
    pub trust_problems: Vec<String>,
}

/// The proxy and the certificates every connection of this process uses, read as a
/// connection reads them (the trust store is read now if no TLS connection has read it yet).
/// An unusable proxy variable is the error every connection would report.
pub fn report() -> Result<NetworkReport, String> {
    let network = network()?;
    let named = |var: &str| {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(|v| format!("{var}={}", v.to_string_lossy()))
    };
    let trust = match (named(CERT_FILE_VAR), named(CERT_DIR_VAR)) {
        (None, None) => "the operating system's certificates".to_owned(),
        (file, dir) => file
            .into_iter()
            .chain(dir)
            .collect::<Vec<_>>()
            .join(" and "),
    };
    Ok(NetworkReport {
        proxy: network
            .proxy
            .as_ref()
            .map(|proxy| format!("{} ({})", proxy.address, proxy.var)),
        trust,
        trust_problems: network.trust_problems().to_vec(),
    })
}

/// The client TLS settings: the bundled web roots and the system's (or `SSL_CERT_FILE` /
/// `SSL_CERT_DIR`'s) certificates, TLS 1.2 and 1.3. A store that cannot be read leaves the
/// web roots, and says why in the log.
fn tls_config() -> (Arc<rustls::ClientConfig>, Vec<String>) {
    install_crypto_provider();
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let named = |var: &str| std::env::var_os(var).filter(|v| !v.is_empty());
    let (certs, problems) = match (named(CERT_FILE_VAR), named(CERT_DIR_VAR)) {
        (None, None) => {
            let native = rustls_native_certs::load_native_certs();
            let problems = native.errors.iter().map(ToString::to_string).collect();
            (native.certs, problems)
        }
        // What the user named is read here, with bounds, not by rustls-native-certs, which
        // reads a file whole whatever it is (`/dev/zero` ran the process out of memory).
        (file, dirs) => {
            let mut found = Found::default();
            if let Some(file) = file {
                found.file(Path::new(&file), CERT_FILE_VAR, true);
            }
            for dir in dirs.iter().flat_map(std::env::split_paths) {
                if !dir.as_os_str().is_empty() {
                    found.dir(&dir);
                }
            }
            (found.certs, found.problems)
        }
    };
    let (added, ignored) = roots.add_parsable_certificates(certs);
    for problem in &problems {
        warn!("trusted certificates: {problem}");
    }
    info!(
        added,
        ignored, "trusting the bundled web roots and the system's certificates"
    );
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    (Arc::new(config), problems)
}

/// The variables naming certificates to trust instead of the system's.
const CERT_FILE_VAR: &str = "SSL_CERT_FILE";
const CERT_DIR_VAR: &str = "SSL_CERT_DIR";
/// Files read from `SSL_CERT_DIR` folders: an `openssl rehash` folder holds a few hundred.
const MAX_DIR_FILES: usize = 4096;
/// Bytes read from `SSL_CERT_DIR` folders together.
const MAX_DIR_BYTES: u64 = 64 << 20;

/// Certificates read from `SSL_CERT_FILE` and `SSL_CERT_DIR`, and why some could not be.
#[derive(Default)]
struct Found {
    certs: Vec<CertificateDer<'static>>,
    problems: Vec<String>,
    files: usize,
    bytes: u64,
}

impl Found {
    /// A PEM bundle; `named_by` says who named it. A file with no certificate in it is a
    /// problem to tell when `must_hold` (the one file the user named).
    fn file(&mut self, path: &Path, named_by: &str, must_hold: bool) {
        let bytes = match crate::file::read_bounded(path, FileKind::CERTIFICATES) {
            Ok(bytes) => bytes,
            Err(error) => return self.problems.push(format!("{error} ({named_by})")),
        };
        self.bytes += bytes.len() as u64;
        let before = self.certs.len();
        let mut unreadable = None;
        for cert in CertificateDer::pem_slice_iter(&bytes) {
            match cert {
                Ok(cert) => self.certs.push(cert),
                Err(error) => unreadable = Some(error),
            }
        }
        if must_hold && self.certs.len() == before {
            self.problems.push(match unreadable {
                Some(error) => format!(
                    "certificate file {} ({named_by}) is not PEM certificates livetalk can read ({error})",
                    path.display()
                ),
                None => format!(
                    "certificate file {} ({named_by}) holds no certificate (no -----BEGIN CERTIFICATE----- block)",
                    path.display()
                ),
            });
        }
    }

    /// Every regular file of a folder (as `openssl rehash` makes them), within bounds.
    fn dir(&mut self, dir: &Path) {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(error) => {
                return self.problems.push(format!(
                    "certificate folder {} ({CERT_DIR_VAR}) cannot be read: {error}",
                    dir.display()
                ));
            }
        };
        for entry in entries.filter_map(Result::ok) {
            if self.files >= MAX_DIR_FILES || self.bytes >= MAX_DIR_BYTES {
                return self.problems.push(format!(
                    "certificate folder {} ({CERT_DIR_VAR}) holds more than livetalk reads ({MAX_DIR_FILES} files, {} MiB); the rest is not trusted",
                    dir.display(),
                    MAX_DIR_BYTES >> 20
                ));
            }
            let path = entry.path();
            // Symbolic links (rehash makes them) are followed; FIFOs, devices and folders
            // are passed over, as other TLS libraries do.
            if std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
                self.files += 1;
                // A folder may hold other files (a README): only unreadable ones are said.
                self.file(&path, CERT_DIR_VAR, false);
            }
        }
    }
}

/// Installs ring as rustls's process-wide crypto provider (no cmake, no OpenSSL), once.
/// [`connect`](crate::connect) does this itself; a program that builds its own rustls
/// configuration first (a TLS server beside the client, as the mock is) calls it before.
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate made by the openssl command, as PEM.
    fn certificate_pem(dir: &Path, name: &str) -> Vec<u8> {
        let status = std::process::Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args(["-subj", &format!("/CN={name}"), "-keyout"])
            .arg(dir.join(format!("{name}.key")))
            .arg("-out")
            .arg(dir.join(format!("{name}.pem")))
            .stderr(std::process::Stdio::null())
            .status()
            .expect("openssl runs (scripts/test.sh installs it)");
        assert!(status.success());
        std::fs::read(dir.join(format!("{name}.pem"))).unwrap()
    }

    #[test]
    fn a_certificate_folder_is_read_file_by_file_and_a_named_file_must_hold_one() {
        let scratch = tempfile::tempdir().unwrap();
        let pem = certificate_pem(scratch.path(), "one");
        let folder = scratch.path().join("certs");
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(folder.join("a1b2c3d4.0"), &pem).unwrap();
        // What a folder may also hold is passed over: a README, a link to the same file, a
        // FIFO, a sub-folder.
        std::fs::write(folder.join("README"), "certificates for the proxy\n").unwrap();
        std::os::unix::fs::symlink(folder.join("a1b2c3d4.0"), folder.join("proxy.pem")).unwrap();
        assert!(
            std::process::Command::new("mkfifo")
                .arg(folder.join("pipe"))
                .status()
                .unwrap()
                .success()
        );
        std::fs::create_dir(folder.join("old")).unwrap();
        let mut found = Found::default();
        found.dir(&folder);
        assert!(found.problems.is_empty(), "{:?}", found.problems);
        assert_eq!(found.certs.len(), 2, "the file and the link to it");

        let mut found = Found::default();
        found.file(&folder.join("README"), CERT_FILE_VAR, true);
        assert!(found.certs.is_empty());
        assert_eq!(
            found.problems,
            [format!(
                "certificate file {} (SSL_CERT_FILE) holds no certificate (no -----BEGIN CERTIFICATE----- block)",
                folder.join("README").display()
            )]
        );
        let mut found = Found::default();
        found.file(Path::new("/dev/zero"), CERT_FILE_VAR, true);
        assert_eq!(
            found.problems,
            ["certificate file /dev/zero is a character device, not a file (SSL_CERT_FILE)"]
        );
    }
}
