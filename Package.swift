// swift-tools-version:6.0
import Foundation
import PackageDescription

// lucid's engine. `LucidEngine` is the Swift library that Swift apps import; `lucid` is the
// dynamic library (liblucid.so / liblucid.dylib) exporting the C ABI in include/lucid.h,
// which the Python package loads with ctypes. Both are the same engine, so a Swift caller
// and a C/Python caller on one thread share one autocast state.
// `LUCID_METAL_EMULATION=1` makes the check build (`make metal-emulated`): on Linux the engine
// then compiles its Metal backend against an emulation of the Metal and Metal Performance
// Shaders APIs (tests/metal/Metal, tests/metal/MetalPerformanceShaders), whose kernels are the
// backend's .metal files compiled as C++ (tests/metal/MSLKernels), and its Accelerate BLAS
// against an emulation of Accelerate backed by OpenBLAS (tests/metal/Accelerate).
// The product never includes it.
let emulateMetal = Context.environment["LUCID_METAL_EMULATION"] == "1"

// On Linux the engine links OpenBLAS and oneDNN from PyPI packages. SwiftPM finds their headers
// and libraries through lucid-native.pc on PKG_CONFIG_PATH (`make build` writes it into
// .venv/lib/pkgconfig; `python lucid/_native.py pkg-config DIR` writes it anywhere). A .pc file
// cannot give a run path to SwiftPM, so the manifest reads the file's `runpath` variable and
// links it into whatever links the engine: a program then finds the libraries with no
// environment variables. (Apple platforms use Accelerate and need none of it, and get no
// unsafe flags: an app can depend on the package by version there.)
let nativeRunPath: [String] = {
    #if os(Linux)
    for dir in (Context.environment["PKG_CONFIG_PATH"] ?? "").split(separator: ":") {
        guard let text = try? String(contentsOfFile: "\(dir)/lucid-native.pc", encoding: .utf8) else { continue }
        for line in text.split(separator: "\n") where line.hasPrefix("runpath=") {
            return line.dropFirst("runpath=".count).split(separator: ":").flatMap {
                ["-Xlinker", "-rpath", "-Xlinker", String($0)]
            }
        }
    }
    #endif
    return []
}()

let metalEmulation: [Target] =
    emulateMetal
    ? [
        .target(
            name: "MSLKernels",
            path: "tests/metal/MSLKernels",
            cxxSettings: [.headerSearchPath("../include"), .unsafeFlags(["-Wno-unknown-attributes"])]
        ),
        .target(name: "Metal", dependencies: ["MSLKernels"], path: "tests/metal/Metal"),
        .target(name: "MetalPerformanceShaders", dependencies: ["Metal"], path: "tests/metal/MetalPerformanceShaders"),
        .target(name: "Accelerate", dependencies: ["CBLAS"], path: "tests/metal/Accelerate"),
    ] : []

let package = Package(
    name: "lucid",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "LucidEngine", targets: ["LucidEngine"]),
        .library(name: "lucid", type: .dynamic, targets: ["LucidCABI"]),
    ],
    targets: [
        // On Linux the CPU backend links OpenBLAS (scipy-openblas32) and oneDNN 3
        // (onednn-cpu-gomp) from PyPI, found through lucid-native.pc (above). Apple platforms
        // use Accelerate.
        .systemLibrary(name: "CBLAS", path: "Sources/CBLAS", pkgConfig: "lucid-native"),
        // oneDNN: bfloat16 GEMM (AVX-512 BF16 / AMX), convolution, softmax, attention pieces.
        .systemLibrary(name: "CDNNL", path: "Sources/CDNNL", pkgConfig: "lucid-native"),
        // Host loops compiled for several vector widths, one chosen at run time (AVX-512,
        // AVX2 or the baseline on x86-64; the baseline elsewhere).
        .target(name: "CHostKernels", path: "Sources/CHostKernels"),
        .target(
            name: "LucidEngine",
            dependencies: [
                "CHostKernels",
                .target(name: "CBLAS", condition: .when(platforms: [.linux])),
                .target(name: "CDNNL", condition: .when(platforms: [.linux])),
            ] + (emulateMetal ? ["Metal", "MetalPerformanceShaders", "Accelerate"] : []),
            path: "Sources/LucidEngine",
            // The kernels reach the engine as strings (MetalKernelSource.swift), not as resources.
            exclude: ["Backends/Metal/Kernels"],
            // On macOS, MTLCreateSystemDefaultDevice gives a process a device only when
            // CoreGraphics is linked (Apple's page for it), which a command-line process such as
            // Python does not do by itself: the library and every Swift app that uses it link it.
            linkerSettings: [.linkedFramework("CoreGraphics", .when(platforms: [.macOS]))]
                + (nativeRunPath.isEmpty ? [] : [.unsafeFlags(nativeRunPath, .when(platforms: [.linux]))])
        ),
        .target(
            name: "LucidCABI",
            dependencies: ["LucidEngine"],
            path: "Sources/LucidCABI"
        ),
        .testTarget(
            name: "LucidEngineTests",
            dependencies: ["LucidEngine", "LucidCABI"],
            path: "tests/swift"
        ),
    ] + metalEmulation,
    cxxLanguageStandard: .cxx17
)
