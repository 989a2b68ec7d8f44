// swift-tools-version:6.0
import PackageDescription

// Build with `-Xswiftc -target-cpu -Xswiftc native` (see README): the default x86-64
// target has no AVX/FMA and the SIMD kernels fall back to scalar library calls.
let package = Package(
    name: "yolo-swift",
    products: [
        .library(name: "YOLOCore", targets: ["YOLOCore"]),
        .executable(name: "yolo", targets: ["yolo"]),
        .executable(name: "yolo-bench", targets: ["yolo-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.0.0"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.4.0"),
        // `yolo serve` only (YOLOServer); YOLOCore stays free of them.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        // Implementation details. Tensor loads OpenBLAS at run time (see Sources/Tensor/GEMM/BLAS.swift).
        .target(name: "Tensor", dependencies: ["CTargetFeatures"]),
        .systemLibrary(name: "CTargetFeatures"),
        .target(name: "YOLONet", dependencies: ["Tensor"], resources: [.copy("Specs")]),
        .systemLibrary(name: "CJPEG", providers: [.apt(["libturbojpeg0-dev"])]),
        .systemLibrary(name: "CPNG", pkgConfig: "libpng", providers: [.apt(["libpng-dev"])]),
        .target(name: "CImageDecode", linkerSettings: [.linkedLibrary("jpeg")]),
        // Public API.
        .target(name: "YOLOCore", dependencies: ["YOLONet", "CJPEG", "CPNG", "CImageDecode", "Yams", .product(name: "Crypto", package: "swift-crypto")]),
        // The HTTP server behind `yolo serve`.
        .target(
            name: "YOLOServer",
            dependencies: [
                "YOLOCore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            // The live view's page, compiled into the binary (`PackageResources.live_html`).
            resources: [.embedInCode("LiveView/live.html")]
        ),
        .executableTarget(
            name: "yolo",
            dependencies: ["YOLOCore", "YOLONet", "Tensor", "YOLOServer", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .executableTarget(
            name: "yolo-bench",
            dependencies: ["YOLOCore", "YOLONet", "Tensor", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        // Hardening tools run by scripts/fuzz and scripts/soak, not by the tests.
        .executableTarget(name: "yolo-fuzz", dependencies: ["YOLOCore", "YOLONet"], path: "Fuzz/yolo-fuzz"),
        .executableTarget(name: "yolo-soak", dependencies: ["YOLOCore"], path: "Fuzz/yolo-soak"),
        // Shared by the test targets: the ../shared test data, seeded tensors, assertions.
        .target(name: "TestSupport", dependencies: ["Tensor"], path: "Tests/TestSupport"),
        .testTarget(name: "TensorTests", dependencies: ["Tensor", "TestSupport"]),
        // Counts heap allocations for the tests: it defines the process's malloc family.
        .target(name: "AllocationCounter", path: "Tests/AllocationCounter"),
        .testTarget(name: "YOLONetTests", dependencies: ["YOLONet", "AllocationCounter", "TestSupport"]),
        .testTarget(name: "YOLOCoreTests", dependencies: ["YOLOCore", "YOLONet", "TestSupport"]),
        .testTarget(name: "CommandLineTests", dependencies: ["TestSupport"]),
        .testTarget(name: "PlanExamplesTests", dependencies: ["YOLOCore"]),
        .testTarget(
            name: "ServerTests",
            dependencies: [
                "YOLOServer", "YOLOCore", "TestSupport",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
            ]
        ),
    ]
)
