#if canImport(Metal) && !LUCID_NO_METAL
import Metal
#if canImport(ObjectiveC)
import Foundation
#else
import FoundationEssentials
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The kernel libraries compiled ahead of time by Apple's Metal compiler
/// (tools/build_metallibs.py), which a macOS wheel carries beside the engine: the folder
/// `<the engine library's folder>/metal/`, or the one `LUCID_METALLIB_DIR` names, holds
/// `<family>.metallib` for each kernel family (named as `KernelFamily` names it) and
/// `manifest.json`, which gives each family's library and the SHA-256 of the source it was
/// made from (Kernels/Common.metal followed by the family's file, as `MetalKernelSource` joins
/// them). A family's library is loaded only when that hash is the hash of the source this
/// engine embeds; otherwise, or when it does not load, the family is compiled from source and
/// the reason kept for the one warning `MetalSelfTest.admit` gives. Without the folder (an
/// editable install, a Linux wheel) every family is compiled from source, silently.
struct MetalPrebuilt {
    let directory: String
    /// The manifest's libraries by family, or why the folder's libraries cannot be used.
    private let manifest: Result<Manifest, Unusable>

    /// A family's library, loaded, or why it was not.
    enum Outcome {
        /// `identity` is what the self-test's cache keys the library by (its file's bytes).
        case loaded(any MTLLibrary, path: String, identity: UInt64)
        case unused(String)
    }

    /// The folder of prebuilt libraries, or nil when there is none.
    static func find() -> MetalPrebuilt? {
        let directory: String
        if let named = environmentValue("LUCID_METALLIB_DIR"), !named.isEmpty {
            directory = named
        } else if let engine = engineDirectory() {
            directory = engine + "/metal"
        } else {
            return nil
        }
        guard let handle = opendir(directory) else { return nil }
        closedir(handle)
        return MetalPrebuilt(directory: directory)
    }

    /// The folder of the library (or executable) the engine was loaded from, as it was named
    /// when loaded.
    static func engineDirectory() -> String? {
        #if canImport(Darwin)
        var info = Dl_info()
        guard dladdr(#dsohandle, &info) != 0, let name = info.dli_fname else { return nil }
        let path = String(cString: name)
        #else
        // Glibc's Swift module leaves dladdr out (a GNU extension); the same function, found by
        // name. Its Dl_info is four pointers, the file's name first.
        typealias Lookup = @convention(c) (UnsafeRawPointer?, UnsafeMutableRawPointer?) -> Int32
        guard let symbol = dlsym(nil, "dladdr") else { return nil }
        let info = UnsafeMutablePointer<UnsafePointer<CChar>?>.allocate(capacity: 4)
        defer { info.deallocate() }
        info.initialize(repeating: nil, count: 4)
        guard unsafeBitCast(symbol, to: Lookup.self)(#dsohandle, UnsafeMutableRawPointer(info)) != 0, let name = info[0] else {
            return nil
        }
        let path = String(cString: name)
        #endif
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return String(path[..<slash])
    }

    private init(directory: String) {
        self.directory = directory
        manifest = Self.readManifest(directory + "/manifest.json")
    }

    /// The library of family `name` (a Kernels/<name>.metal file) if it was made from `source`.
    func load(_ name: String, source: String, on gpu: any MTLDevice) -> Outcome {
        let manifest: Manifest
        switch self.manifest {
        case .success(let m): manifest = m
        case .failure(let why): return .unused(why.reason)
        }
        let family = name.lowercased()
        guard let entry = manifest.families[family] else { return .unused("manifest.json names no library for it") }
        // A name inside the folder, nothing else.
        guard !entry.metallib.isEmpty, !entry.metallib.contains("/"), !entry.metallib.hasPrefix(".") else {
            return .unused("manifest.json names its library '\(entry.metallib)', which is not a file name in the folder")
        }
        let ours = Self.sha256(Array(source.utf8))
        guard entry.sha256.lowercased() == ours else {
            return .unused(
                "\(entry.metallib) was made from other sources than this engine's (SHA-256 \(entry.sha256.prefix(12))… in "
                    + "manifest.json, \(ours.prefix(12))… here)")
        }
        let path = directory + "/" + entry.metallib
        let url = URL(fileURLWithPath: path)
        do {
            let library = try gpu.makeLibrary(URL: url)
            let bytes = try Data(contentsOf: url)
            return .loaded(library, path: path, identity: MetalSelfTestCache.fnv1a(Array("metallib\n".utf8) + bytes))
        } catch {
            return .unused("\(entry.metallib) did not load: \(error)")
        }
    }

    /// manifest.json as tools/build_metallibs.py writes it (the fields the loader reads).
    private struct Manifest: Decodable {
        let std: String
        let families: [String: Entry]

        struct Entry: Decodable {
            let metallib: String
            let sha256: String
        }
    }

    private struct Unusable: Error {
        let reason: String
    }

    private static func readManifest(_ path: String) -> Result<Manifest, Unusable> {
        guard access(path, F_OK) == 0 else { return .failure(Unusable(reason: "the folder has no manifest.json")) }
        do {
            let manifest = try JSONDecoder().decode(Manifest.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
            // The kernels use bfloat: the engine compiles them as MSL 3.1, and so must the build.
            guard manifest.std == "metal3.1" else {
                return .failure(Unusable(reason: "manifest.json says they were compiled as \(manifest.std), not metal3.1"))
            }
            return .success(manifest)
        } catch {
            return .failure(Unusable(reason: "its manifest.json could not be read: \(error)"))
        }
    }

    // MARK: - SHA-256 (FIPS 180-4), the hash manifest.json gives each library's source

    private static let initialHash: [UInt32] = [
        0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19,
    ]

    private static let roundConstants: [UInt32] = [
        0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
        0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
        0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
        0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
        0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
        0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
        0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
        0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
    ]

    /// The SHA-256 of `bytes`, as 64 lower-case hex digits.
    static func sha256(_ bytes: [UInt8]) -> String {
        var message = bytes
        message.append(0x80)
        while message.count % 64 != 56 { message.append(0) }
        let bits = UInt64(bytes.count) &* 8
        for shift in stride(from: 56, through: 0, by: -8) { message.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        func rotate(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }
        var hash = initialHash
        var w = [UInt32](repeating: 0, count: 64)
        for block in stride(from: 0, to: message.count, by: 64) {
            for t in 0..<16 {
                w[t] = message[block + 4 * t..<block + 4 * t + 4].reduce(0) { $0 << 8 | UInt32($1) }
            }
            for t in 16..<64 {
                let s0 = rotate(w[t - 15], 7) ^ rotate(w[t - 15], 18) ^ (w[t - 15] >> 3)
                let s1 = rotate(w[t - 2], 17) ^ rotate(w[t - 2], 19) ^ (w[t - 2] >> 10)
                w[t] = w[t - 16] &+ s0 &+ w[t - 7] &+ s1
            }
            var (a, b, c, d, e, f, g, h) = (hash[0], hash[1], hash[2], hash[3], hash[4], hash[5], hash[6], hash[7])
            for t in 0..<64 {
                let t1 = h &+ (rotate(e, 6) ^ rotate(e, 11) ^ rotate(e, 25)) &+ ((e & f) ^ (~e & g)) &+ roundConstants[t] &+ w[t]
                let t2 = (rotate(a, 2) ^ rotate(a, 13) ^ rotate(a, 22)) &+ ((a & b) ^ (a & c) ^ (b & c))
                (h, g, f, e, d, c, b, a) = (g, f, e, d &+ t1, c, b, a, t1 &+ t2)
            }
            for (i, v) in [a, b, c, d, e, f, g, h].enumerated() { hash[i] &+= v }
        }
        return hash.map { word in
            let digits = String(word, radix: 16)
            return String(repeating: "0", count: 8 - digits.count) + digits
        }.joined()
    }
}
#endif
