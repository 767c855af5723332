// swift-tools-version:6.0
import PackageDescription

// Two Swift programs that use lucid's engine as an app would: `train` trains an MLP under
// autocast with a GradScaler and a learning-rate schedule and saves a checkpoint; `deploy`
// loads a checkpoint written by Python's `lucid.save(model.state_dict(), path)` and runs it.
// On Linux, build with PKG_CONFIG_PATH=<lucid>/.venv/lib/pkgconfig (after `make build`); on a
// Mac, a plain `swift build`.
let package = Package(
    name: "lucid-examples",
    platforms: [.macOS(.v14)],
    dependencies: [.package(name: "lucid", path: "../..")],
    targets: [
        .executableTarget(name: "train", dependencies: [.product(name: "LucidEngine", package: "lucid")]),
        .executableTarget(name: "deploy", dependencies: [.product(name: "LucidEngine", package: "lucid")]),
    ]
)
