//! The proxy's own TLS identity when none is given: a self-signed certificate for its listen
//! address, made once with rcgen and kept in the data folder (`proxy-tls/<address>/`), so an
//! app told to trust it once keeps trusting it.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// Where a certificate and its key are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The folder of the certificate for `ip` under `data_dir`.
pub fn folder(data_dir: &Path, ip: IpAddr) -> PathBuf {
    // `:` is no good in a file name on some systems; an IPv6 address keeps its digits.
    data_dir
        .join("proxy-tls")
        .join(ip.to_string().replace(':', "-"))
}

/// The certificate for `ip` in `data_dir`: the one made before when both files are there,
/// else a new one (and `true`). The names it is valid for: the address, and for a loopback or
/// unspecified address `localhost`, `127.0.0.1` and `::1` too.
pub fn self_signed(data_dir: &Path, ip: IpAddr) -> anyhow::Result<(CertFiles, bool)> {
    let dir = folder(data_dir, ip);
    let files = CertFiles {
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
    };
    if files.cert.is_file() && files.key.is_file() {
        return Ok((files, false));
    }
    let mut names = vec![ip.to_string()];
    if ip.is_loopback() || ip.is_unspecified() {
        for name in ["localhost", "127.0.0.1", "::1"] {
            if !names.iter().any(|n| n == name) {
                names.push(name.to_owned());
            }
        }
    }
    let mut params =
        rcgen::CertificateParams::new(names).context("making the proxy's certificate")?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("livetalk proxy {ip}"));
    let key = rcgen::KeyPair::generate().context("making the proxy's key")?;
    let cert = params
        .self_signed(&key)
        .context("signing the proxy's certificate")?;
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let cert_pem =
        pem_rfc7468::encode_string("CERTIFICATE", pem_rfc7468::LineEnding::LF, cert.der())
            .map_err(|e| anyhow::anyhow!("writing the proxy's certificate: {e}"))?;
    let key_pem = pem_rfc7468::encode_string(
        "PRIVATE KEY",
        pem_rfc7468::LineEnding::LF,
        &key.serialize_der(),
    )
    .map_err(|e| anyhow::anyhow!("writing the proxy's key: {e}"))?;
    write_private(&files.key, key_pem.as_bytes())?;
    std::fs::write(&files.cert, cert_pem)
        .with_context(|| format!("cannot write {}", files.cert.display()))?;
    Ok((files, true))
}

/// Writes a file only its owner can read (the key).
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(bytes)
        .with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_is_made_once_and_then_reused() {
        let dir = tempfile::tempdir().unwrap();
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let (files, made) = self_signed(dir.path(), ip).unwrap();
        assert!(made);
        let first = std::fs::read(&files.cert).unwrap();
        assert!(String::from_utf8_lossy(&first).starts_with("-----BEGIN CERTIFICATE-----"));
        let (again, made) = self_signed(dir.path(), ip).unwrap();
        assert!(!made);
        assert_eq!(again, files);
        assert_eq!(std::fs::read(&again.cert).unwrap(), first);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&files.key).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "the key is its owner's alone");
        }
        // The mock's TLS loads it, as the proxy does.
        livetalk_mock::tls_acceptor(&files.cert, &files.key).unwrap();
    }
}
