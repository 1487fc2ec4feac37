// swift-tools-version:6.2
import PackageDescription

/// Swift 6 language mode everywhere, with existential `any` spelled out.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny")
]

let package = Package(
    name: "Stockroom",
    // macOS 15 for the server's dependencies; iOS 15 for apps that add StockroomKit alone.
    platforms: [.macOS(.v15), .iOS(.v15)],
    products: [
        .executable(name: "stockroom", targets: ["stockroom"]),
        // The app's side of the flow: Foundation only, no dependency of the server's.
        .library(name: "StockroomKit", targets: ["StockroomKit"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/groue/GRDB.swift.git", exact: "7.10.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
    ],
    targets: [
        // System libraries, with small C shims for what Swift cannot call directly.
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .systemLibrary(name: "CMalloc"),
        .systemLibrary(name: "CCRC32C"),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),

        // The domain: catalogue, content, ledger, verification, upstream client, crypto.
        .target(
            name: "StockroomCore",
            dependencies: [
                "CCurl",
                "CCRC32C",
                "CMalloc",
                "COpenSSL",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            // Apple's public roots: Root CA - G3 (StoreKit 2 JWS) and Apple Inc. Root (app receipts).
            resources: [.copy("Resources/AppleRootCA-G3.pem"), .copy("Resources/AppleIncRootCertificate.pem")],
            swiftSettings: swiftSettings
        ),
        // The default ledger, on SQLite through GRDB: the engine and its records, apart from the domain.
        .target(
            name: "StockroomSQLite",
            dependencies: [
                "StockroomCore",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        // The ledger on PostgreSQL, for several instances sharing one database: no HTTP in it.
        .target(
            name: "StockroomPostgres",
            dependencies: [
                "StockroomCore",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                // Only to recognise the pool's own errors (a tripped circuit breaker) as a lost database.
                .product(name: "_ConnectionPoolModule", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // HTTP responses the server and the simulator share: the JSON error shape, content streaming.
        .target(
            name: "StockroomHTTP",
            dependencies: [
                "StockroomCore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Every decision to serve, refuse, revoke, reinstate or re-fulfil: no HTTP in it.
        .target(
            name: "StockroomEntitlement",
            dependencies: [
                "StockroomCore",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The Hummingbird application.
        .target(
            name: "StockroomServer",
            dependencies: [
                "StockroomCore",
                "StockroomHTTP",
                "StockroomEntitlement",
                "StockroomSQLite",
                "StockroomPostgres",
                "AppStoreSimulator",
                .product(name: "Hummingbird", package: "hummingbird"),
                // The connection's pipeline is assembled below Hummingbird's router.
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The local App Store: verifyReceipt, the Server API and a control API.
        .target(
            name: "AppStoreSimulator",
            dependencies: [
                "StockroomCore",
                "StockroomHTTP",
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            swiftSettings: swiftSettings
        ),
        // The app's side: catalogue, delivery with a journal, outcomes, StoreKit glue. Foundation only.
        .target(name: "StockroomKit", swiftSettings: swiftSettings),
        // The one executable.
        .executableTarget(
            name: "stockroom",
            dependencies: [
                "StockroomKit",
                "StockroomCore",
                "StockroomEntitlement",
                "StockroomServer",
                "StockroomSQLite",
                "StockroomPostgres",
                "AppStoreSimulator",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // `make bench` only: verification and download timings.
        .executableTarget(
            name: "StockroomBench",
            dependencies: [
                "StockroomCore",
                "StockroomSQLite",
                "AppStoreSimulator",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // `make bench` only (.ci/bench-client): one delivery in a process linking StockroomKit alone.
        .executableTarget(name: "StockroomKitBench", dependencies: ["StockroomKit"], swiftSettings: swiftSettings),
        // `make fuzz` and the fuzz step of `make test` (`.ci/fuzz`): libFuzzer harnesses when built
        // with `--sanitize=fuzzer -DSTOCKROOM_LIBFUZZER`; otherwise a driver replaying inputs through them.
        .executableTarget(
            name: "StockroomFuzz",
            dependencies: [
                "StockroomCore",
                "StockroomKit",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Fuzz/Sources",
            swiftSettings: swiftSettings
        ),

        // Helpers shared by the test targets: temporary folders, sample bytes.
        .target(
            name: "StockroomTestSupport",
            dependencies: [
                "StockroomCore",
                "AppStoreSimulator",
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ],
            path: "Tests/StockroomTestSupport",
            swiftSettings: swiftSettings
        ),
        // The engines the ledger and server suites run on, and a fresh PostgreSQL database per
        // test on the cluster of `.ci/postgres` (STOCKROOM_TEST_POSTGRES).
        .target(
            name: "StockroomPostgresTestSupport",
            dependencies: [
                "StockroomCore",
                "StockroomSQLite",
                "StockroomPostgres",
                "StockroomTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/StockroomPostgresTests/Support",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "StockroomPostgresTests",
            dependencies: [
                "StockroomPostgres",
                "StockroomCore",
                "StockroomTestSupport",
                "AppStoreSimulator",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                "StockroomPostgresTestSupport",
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            path: "Tests/StockroomPostgresTests/Tests",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "StockroomCoreTests",
            dependencies: [
                "StockroomCore",
                "StockroomSQLite",
                "StockroomPostgres",
                "StockroomPostgresTestSupport",
                "StockroomHTTP",
                "AppStoreSimulator",
                "StockroomTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "StockroomEntitlementTests",
            dependencies: [
                "StockroomEntitlement",
                "StockroomCore",
                "StockroomPostgresTestSupport",
                "AppStoreSimulator",
                "StockroomTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "StockroomServerTests",
            dependencies: [
                "StockroomServer",
                "StockroomPostgres",
                "StockroomPostgresTestSupport",
                "StockroomCore",
                "StockroomSQLite",
                "AppStoreSimulator",
                "StockroomEntitlement",
                "StockroomTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // StockroomKit against the live server and simulator over loopback.
        .testTarget(
            name: "StockroomKitTests",
            dependencies: [
                "StockroomKit",
                "StockroomServer",
                "StockroomCore",
                "StockroomSQLite",
                "AppStoreSimulator",
                "StockroomTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AppStoreSimulatorTests",
            dependencies: [
                "AppStoreSimulator",
                "StockroomCore",
                "StockroomTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)

// An app that adds only StockroomKit, with `traits: []`, fetches and builds none of the server's
// dependencies: each one is needed by the `Server` trait, on by default (README, "StockroomKit").
package.traits = [.default(enabledTraits: ["Server"]), .trait(name: "Server", description: "The server, the simulator and their tools.")]
for target in package.targets {
    target.dependencies = target.dependencies.map { dependency in
        guard case .productItem(let name, let package, let aliases, nil) = dependency else { return dependency }
        return .productItem(name: name, package: package, moduleAliases: aliases, condition: .when(traits: ["Server"]))
    }
}
