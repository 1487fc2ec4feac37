import Foundation
import StockroomCore
import StockroomTestSupport
import Testing

/// How the store is named and reached: credentials as AWS's tools read them (the variables first,
/// then a profile of the shared file), endpoints checked and normalised, the addressing style, and
/// `s3://` locations and keys.
@Suite struct ObjectStoreSettingsTests {
    static let file = """
        # a comment
        [default]
        aws_access_key_id = DEFAULTKEY
        aws_secret_access_key = default-secret

        [profile shop]
        aws_access_key_id=SHOPKEY
        aws_secret_access_key=shop-secret
        aws_session_token = shop-token
        ; another comment
        [broken]
        aws_access_key_id = BROKENKEY
        """

    @Test func theVariablesComeFirstThenTheProfileOfTheSharedFile() throws {
        let folder = try TemporaryFolder()
        let path = try folder.write("credentials", Self.file)
        let fromVariables = try ObjectStoreCredentials.resolve(environment: [
            "AWS_ACCESS_KEY_ID": "ENVKEY", "AWS_SECRET_ACCESS_KEY": "env-secret", "AWS_SESSION_TOKEN": "env-token",
            "AWS_SHARED_CREDENTIALS_FILE": path,
        ])
        #expect(fromVariables.accessKeyID == "ENVKEY")
        #expect(fromVariables.sessionToken == "env-token")
        let fromDefault = try ObjectStoreCredentials.resolve(environment: ["AWS_SHARED_CREDENTIALS_FILE": path])
        #expect((fromDefault.accessKeyID, fromDefault.secretAccessKey, fromDefault.sessionToken) == ("DEFAULTKEY", "default-secret", nil))
        let fromProfile = try ObjectStoreCredentials.resolve(environment: ["AWS_SHARED_CREDENTIALS_FILE": path, "AWS_PROFILE": "shop"])
        #expect(
            (fromProfile.accessKeyID, fromProfile.secretAccessKey, fromProfile.sessionToken) == ("SHOPKEY", "shop-secret", "shop-token"))
        // --s3-profile names a profile over the variables.
        let named = try ObjectStoreCredentials.resolve(
            environment: ["AWS_ACCESS_KEY_ID": "ENVKEY", "AWS_SECRET_ACCESS_KEY": "env-secret", "AWS_SHARED_CREDENTIALS_FILE": path],
            profile: "shop")
        #expect(named.accessKeyID == "SHOPKEY")
        // ~/.aws/credentials when no file is named.
        _ = try folder.write("home/.aws/credentials", Self.file)
        #expect(try ObjectStoreCredentials.resolve(environment: ["HOME": folder.path + "/home"]).accessKeyID == "DEFAULTKEY")
    }

    @Test func whatIsMissingIsSaidWithoutASecret() throws {
        let folder = try TemporaryFolder()
        let path = try folder.write("credentials", Self.file)
        let cases: [([String: String], String?, String)] = [
            (["AWS_ACCESS_KEY_ID": "ENVKEY"], nil, "but AWS_SECRET_ACCESS_KEY is not"),
            (["AWS_SHARED_CREDENTIALS_FILE": path], "nowhere", "has no profile [nowhere]"),
            (["AWS_SHARED_CREDENTIALS_FILE": path], "broken", "lacks aws_access_key_id or aws_secret_access_key"),
            (["AWS_SHARED_CREDENTIALS_FILE": folder.path + "/absent"], nil, "not readable"),
        ]
        for (environment, profile, expected) in cases {
            #expect {
                _ = try ObjectStoreCredentials.resolve(environment: environment, profile: profile)
            } throws: { error in
                let text = "\(error)"
                return text.contains(expected) && !text.contains("secret-") && !text.contains("default-secret")
            }
        }
        let credentials = SigV4.Credentials(accessKeyID: "KEY", secretAccessKey: "never-printed", sessionToken: "nor-this")
        #expect(!"\(credentials)".contains("never-printed") && !"\(credentials)".contains("nor-this"))
    }

    @Test func anEndpointWithCredentialsInItIsRefusedWithoutRepeatingThem() {
        let credentials = SigV4.Credentials(accessKeyID: "KEY", secretAccessKey: "secret")
        for bad in ["http://KEY:hunter2pass@store:8333/", "https://user:hunter2pass@store", "http://hunter2pass@store"] {
            #expect {
                try ObjectStoreSettings(endpoint: bad, region: "us-east-1", credentials: credentials)
            } throws: { error in
                let text = "\(error)"
                return text.contains("--s3-endpoint") && text.contains("***@store") && !text.contains("hunter2pass")
            }
        }
    }

    @Test func everyURLInAMessageLosesItsUserInformationAndKeepsTheRest() {
        #expect(URLText.redacted("http://KEY:SECRET@host:9000/path?q=1") == "http://***@host:9000/path?q=1")
        #expect(URLText.redacted("not \"https://a:b@x/\" nor https://c@y") == "not \"https://***@x/\" nor https://***@y")
        #expect(URLText.redacted("https://host/a@b") == "https://host/a@b")
        #expect(URLText.redacted("no URL here: a@b") == "no URL here: a@b")
    }

    @Test func endpointsAreCheckedAndADefaultPortIsLeftOut() throws {
        let credentials = SigV4.Credentials(accessKeyID: "KEY", secretAccessKey: "secret")
        for bad in ["ftp://store", "https://", "https://store/path", "https://store?x=1", "store:9000"] {
            #expect(throws: ObjectStoreSettingError.endpoint(bad)) {
                try ObjectStoreSettings(endpoint: bad, region: "us-east-1", credentials: credentials)
            }
        }
        #expect(throws: ObjectStoreSettingError.region("us east")) {
            try ObjectStoreSettings(endpoint: nil, region: "us east", credentials: credentials)
        }
        let https443 = try ObjectStoreSettings(endpoint: "https://s3.example.com:443", region: "auto", credentials: credentials)
        #expect(https443.endpoint?.absoluteString == "https://s3.example.com")
        #expect(https443.addressing == .path)
        #expect(https443.url(bucket: "shop", key: "a b/c+d.bin") == "https://s3.example.com/shop/a%20b/c%2Bd.bin")
        let minio = try ObjectStoreSettings(endpoint: "http://127.0.0.1:9000/", region: "us-east-1", credentials: credentials)
        #expect(minio.url(bucket: "shop", key: "k") == "http://127.0.0.1:9000/shop/k")
        let aws = try ObjectStoreSettings(endpoint: nil, region: "eu-west-1", credentials: credentials)
        #expect(aws.addressing == .virtual)
        #expect(aws.url(bucket: "shop", key: "k") == "https://shop.s3.eu-west-1.amazonaws.com/k")
        let ipv6 = try ObjectStoreSettings(endpoint: "http://[::1]:9000", region: "us-east-1", credentials: credentials)
        #expect(ipv6.url(bucket: "shop", key: "k") == "http://[::1]:9000/shop/k")
    }

    @Test func locationsAndKeysFollowTheirRules() throws {
        #expect(try ObjectLocation(parsing: "s3://shop") == ObjectLocation(bucket: "shop", prefix: ""))
        #expect(try ObjectLocation(parsing: "s3://shop/content")?.prefix == "content/")
        #expect(try ObjectLocation(parsing: "s3://shop/content/")?.key("books/a.epub") == "content/books/a.epub")
        #expect(try ObjectLocation(parsing: "/srv/content") == nil)
        #expect(throws: ObjectLocationError.bucket("Shop")) { try ObjectLocation(parsing: "s3://Shop/x") }
        #expect(throws: ObjectLocationError.bucket("ab")) { try ObjectLocation(parsing: "s3://ab/x") }
        #expect(throws: ObjectLocationError.prefix("a/../b/")) { try ObjectLocation(parsing: "s3://shop/a/../b") }
        for bad in ["", "a//b", "./a", "a/..", "a\\b", "a b", "a%2Fb", "ä", String(repeating: "a", count: 513)] {
            #expect(!ObjectKey.isValid(bad), "\(bad)")
        }
        for good in ["a", "books/field-guide.epub", "a+b=c,d@e~f!g_h.i-j"] { #expect(ObjectKey.isValid(good)) }
    }
}
