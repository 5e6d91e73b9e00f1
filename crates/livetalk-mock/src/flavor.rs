//! Which service a client dialled, Google AI or Vertex AI, as read from the URL path the
//! official SDKs build; the two differ in small ways on the wire.

/// Which service the client dialled; Vertex differs in small ways on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    GoogleAi,
    Vertex,
}

/// Which service a request path addresses, and the API version it names (`v1beta`), accepting
/// repeated slashes (the SDKs produce `//ws/`).
pub(crate) fn live_path_flavor(path: &str) -> Option<(Flavor, &'static str)> {
    let mut collapsed = String::with_capacity(path.len());
    for c in path.chars() {
        if !(c == '/' && collapsed.ends_with('/')) {
            collapsed.push(c);
        }
    }
    if let Some(rest) = collapsed.strip_prefix("/ws/google.ai.generativelanguage.") {
        let (version, method) = rest.split_once(".GenerativeService.")?;
        let version = known(version, &["v1", "v1beta", "v1alpha"])?;
        let method_ok = matches!(
            method,
            "BidiGenerateContent" | "BidiGenerateContentConstrained"
        );
        return method_ok.then_some((Flavor::GoogleAi, version));
    }
    if let Some(rest) = collapsed.strip_prefix("/ws/google.cloud.aiplatform.") {
        let (version, method) = rest.split_once(".LlmBidiService/")?;
        let version = known(version, &["v1", "v1beta1"])?;
        return (method == "BidiGenerateContent").then_some((Flavor::Vertex, version));
    }
    None
}

/// `version` as one of `versions`.
fn known(version: &str, versions: &[&'static str]) -> Option<&'static str> {
    versions.iter().copied().find(|v| *v == version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sdk_path_variant_is_accepted() {
        for path in [
            "/ws/google.ai.generativelanguage.v1.GenerativeService.BidiGenerateContent",
            "//ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent",
            "/ws/google.ai.generativelanguage.v1alpha.GenerativeService.BidiGenerateContentConstrained",
        ] {
            assert_eq!(
                live_path_flavor(path).map(|(flavor, _)| flavor),
                Some(Flavor::GoogleAi),
                "{path}"
            );
        }
        assert_eq!(
            live_path_flavor(
                "/ws/google.cloud.aiplatform.v1beta1.LlmBidiService/BidiGenerateContent"
            ),
            Some((Flavor::Vertex, "v1beta1"))
        );
        assert_eq!(
            live_path_flavor(
                "/ws/google.ai.generativelanguage.v2.GenerativeService.BidiGenerateContent"
            ),
            None
        );
        assert_eq!(live_path_flavor("/"), None);
    }
}
