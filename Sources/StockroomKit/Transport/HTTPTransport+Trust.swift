#if canImport(Security)
    import Foundation
    import Security

    /// Server trust on Apple platforms, where URLSession carries the transfers: an app's own
    /// authorities replace the system's, and a pinned key must be the leaf's. Not compiled on Linux
    /// (libcurl checks both there, `CurlTransfer`): keep it this small; what it reads of the
    /// certificates is `CertificateKey`'s, tested on Linux.
    extension HTTPTransport {
        func urlSession(
            _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
            completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
        ) {
            guard challenge.protectionSpace.authenticationMethod == NSURLAuthenticationMethodServerTrust else {
                // Neither Stockroom nor an object store it redirects to asks for HTTP authentication:
                // no credential the device holds (Negotiate, NTLM, a client certificate, a stored
                // password) is offered to a host a server's answer chose.
                return completionHandler(.cancelAuthenticationChallenge, nil)
            }
            guard settings.trust.isCustom, let trust = challenge.protectionSpace.serverTrust else {
                return completionHandler(.performDefaultHandling, nil)
            }
            if let file = settings.trust.certificateAuthorities {
                let anchors = CertificateKey.certificates(inPEM: (try? Data(contentsOf: file)) ?? Data())
                    .compactMap { SecCertificateCreateWithData(nil, Data($0) as CFData) }
                guard !anchors.isEmpty else { return completionHandler(.cancelAuthenticationChallenge, nil) }
                SecTrustSetAnchorCertificates(trust, anchors as CFArray)
                SecTrustSetAnchorCertificatesOnly(trust, true)
            }
            guard SecTrustEvaluateWithError(trust, nil) else { return completionHandler(.cancelAuthenticationChallenge, nil) }
            if !settings.trust.pinnedPublicKeys.isEmpty {
                let leaf = (SecTrustCopyCertificateChain(trust) as? [SecCertificate])?.first
                let pin = leaf.flatMap { CertificateKey.pin(ofCertificate: Array(SecCertificateCopyData($0) as Data)) }
                guard let pin, settings.trust.pinnedPublicKeys.contains(pin) else {
                    return completionHandler(.cancelAuthenticationChallenge, nil)
                }
            }
            completionHandler(.useCredential, URLCredential(trust: trust))
        }
    }
#endif
