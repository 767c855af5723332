#if canImport(Metal) && !LUCID_NO_METAL
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension MetalSelfTest {
    /// Readies `gpu` to serve "metal", before it first does: its kernel libraries are compiled
    /// and their pipelines built, the SIMD-group width checked, and each library that compiled
    /// self-tested (unless `cache` remembers it passing). A library that did not compile, or
    /// failed its checks, sends its family to the host (`MetalBackend.decline`), with one
    /// warning that names each such family and why; the others run on the GPU. Nil when the
    /// backend may serve "metal"; else why the whole device runs on the host fallback: SIMD
    /// groups other than 32 wide, or a failure of the core library (the fills and copies that
    /// every family needs).
    static func admit(_ gpu: MetalBackend, cache: MetalSelfTestCache = .shared) -> MetalRefusal? {
        let libraries = gpu.kernelLibraries
        warnOfUnusedPrebuiltLibraries(libraries)
        if let (kernel, width) = gpu.foreignExecutionWidths.min(by: { $0.key < $1.key }) {
            return MetalRefusal(
                "the Metal device \(gpu.gpu.name) runs SIMD groups of \(width) threads (the threadExecutionWidth of \(kernel)), "
                    + "and lucid's Metal kernels are written for 32")
        }
        let core = MetalKernelLibrary.coreFamily
        if let message = libraries.first(where: { $0.family == core })?.error {
            return MetalRefusal("\(message) (the backend's fills and copies are among its kernels)")
        }
        for library in libraries {
            if let message = library.error { gpu.decline(library.family, because: message) }
        }
        var keys: [KernelFamily: String] = [:]
        for library in libraries where library.error == nil {
            keys[library.family] = cache.key(library: library.identity, device: gpu.gpu.name)
        }
        let untested = Set(keys.filter { !cache.passed($0.value) }.keys)
        let failed = untested.isEmpty ? [] : run(gpu, families: untested).filter { !$0.passed }
        let failedCore = failed.filter { $0.family == nil }
        if !failedCore.isEmpty {
            return MetalRefusal(
                "the Metal backend's self-test found kernels that disagree with the CPU: \(names(failedCore)) "
                    + "(lucid.metal.self_test() gives the report)")
        }
        for family in untested.sorted(by: { $0.rawValue < $1.rawValue }) {
            let own = failed.filter { $0.family == family }
            if own.isEmpty {
                if let key = keys[family] { cache.record(key) }
            } else {
                gpu.decline(family, because: "its self-test found kernels that disagree with the CPU: \(names(own))")
            }
        }
        // Where float16 products run is found by the matmul checks; with those remembered, by
        // the probe alone.
        if keys[.matmul] != nil, !untested.contains(.matmul) { _ = probe(gpu) }
        let declined = gpu.declinedFamilies.sorted { $0.key.rawValue < $1.key.rawValue }
        if !declined.isEmpty {
            Warnings.emit(
                "metal: the kernel families \(declined.map(\.key.rawValue).joined(separator: ", ")) run on the host, the others "
                    + "on the GPU: "
                    + declined.map { "\($0.key.rawValue): \($0.value)" }.joined(separator: "; ")
                    + " (lucid.metal.self_test() gives the report)")
        }
        return nil
    }

    /// One warning for the families that were compiled from source although a folder of
    /// libraries compiled ahead of time exists (`MetalPrebuilt`), grouped by why.
    private static func warnOfUnusedPrebuiltLibraries(_ libraries: [MetalKernelLibrary]) {
        let unused = libraries.filter { $0.origin == .source && !$0.detail.isEmpty }
        guard let directory = unused.first?.prebuiltDirectory else { return }
        var reasons: [(why: String, families: [String])] = []
        for library in unused {
            if let i = reasons.firstIndex(where: { $0.why == library.detail }) {
                reasons[i].families.append(library.family.rawValue)
            } else {
                reasons.append((library.detail, [library.family.rawValue]))
            }
        }
        Warnings.emit(
            "metal: the kernel libraries compiled ahead of time in \(directory) were not used for "
                + (unused.count == libraries.count ? "any kernel family" : unused.map(\.family.rawValue).joined(separator: ", "))
                + ", which are compiled from source instead: "
                + reasons.map { "\($0.families.joined(separator: ", ")): \($0.why)" }.joined(separator: "; ")
                + " (lucid.metal.kernel_libraries() says where each family's kernels came from)")
    }

    /// Up to eight checks by op and dtype, and how many more.
    private static func names(_ checks: [Check]) -> String {
        checks.prefix(8).map { "\($0.op) (\($0.dtype.name))" }.joined(separator: ", ")
            + (checks.count > 8 ? " and \(checks.count - 8) more" : "")
    }
}

/// The kernel libraries that passed the self-test on this machine, so that a process does not
/// run the checks of a library it has seen pass: one line per library, keyed by a hash of its
/// source with the device's name, the system's release and the self-test's table, in
/// `metal-self-test` under the user's cache directory (`~/Library/Caches/lucid` on macOS,
/// `$XDG_CACHE_HOME/lucid` or `~/.cache/lucid` elsewhere; `LUCID_CACHE_DIR` overrides it).
/// A changed kernel, another GPU or a system update (a new Metal compiler) makes a new key, so
/// the library is checked again. Only passes are kept: a library that failed is checked at
/// every start. `LUCID_METAL_SELF_TEST_CACHE=0` turns it off.
final class MetalSelfTestCache: @unchecked Sendable {
    static let shared = MetalSelfTestCache(directory: defaultDirectory())

    /// The file, or nil when caching is off (no cache directory).
    let path: String?
    private let lock = Lock()

    init(directory: String?) {
        path = directory.map { $0 + "/metal-self-test" }
    }

    /// Bump when the checks change in a way their table's names do not show (a tolerance, an
    /// input), so that earlier passes are not trusted.
    static let revision = 1

    static func defaultDirectory() -> String? {
        if let raw = environmentValue("LUCID_METAL_SELF_TEST_CACHE"), ["0", "false", "off", "no"].contains(raw.lowercased()) {
            return nil
        }
        if let dir = environmentValue("LUCID_CACHE_DIR"), !dir.isEmpty { return dir }
        guard let home = environmentValue("HOME"), !home.isEmpty else { return nil }
        #if os(macOS)
        return home + "/Library/Caches/lucid"
        #else
        if let xdg = environmentValue("XDG_CACHE_HOME"), xdg.hasPrefix("/") { return xdg + "/lucid" }
        return home + "/.cache/lucid"
        #endif
    }

    /// The key of a library's pass: the library (`MetalKernelLibrary.identity`: a hash of its
    /// source, or of the file of a library compiled ahead of time), the device and the system it
    /// ran on, and the checks that passed.
    func key(library identity: UInt64, device: String) -> String {
        let table = MetalSelfTest.table.map { "\($0.family?.rawValue ?? "core") \($0.name) \($0.dtypes.map(\.name))" }
        let checks = Self.fnv1a(("\(Self.revision)\n" + table.joined(separator: "\n")).utf8)
        let system = Self.fnv1a((device + "\n" + Self.systemRelease()).utf8)
        return [identity, system, checks].map { String($0, radix: 16) }.joined(separator: "-")
    }

    func passed(_ key: String) -> Bool {
        lock.withLock { lines().contains(key) }
    }

    /// Remembers a pass, keeping the 64 latest (written whole and renamed over the file, so
    /// that a process reading it at the same time sees the old file or the new one).
    func record(_ key: String) {
        guard let path else { return }
        lock.withLock {
            var kept = lines().filter { $0 != key }
            kept.append(key)
            let text = kept.suffix(64).joined(separator: "\n") + "\n"
            let directory = String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)])
            Self.makeDirectories(directory)
            let temporary = "\(path).\(getpid()).tmp"
            guard let file = fopen(temporary, "w") else { return }
            let written = text.withCString { fputs($0, file) } >= 0
            if fclose(file) == 0, written {
                rename(temporary, path)
            } else {
                unlink(temporary)
            }
        }
    }

    private func lines() -> [String] {
        guard let path, let file = fopen(path, "r") else { return [] }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = fread(&buffer, 1, buffer.count, file)
            if n <= 0 { break }
            bytes += buffer[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    private static func makeDirectories(_ path: String) {
        var prefix = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            prefix += "/" + part
            mkdir(prefix, 0o755)
        }
    }

    /// The kernel's name, release and version (a system update changes the Metal compiler).
    static func systemRelease() -> String {
        var u = utsname()
        guard uname(&u) == 0 else { return "" }
        func text<T>(_ field: T) -> String {
            withUnsafeBytes(of: field) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
        }
        return [text(u.sysname), text(u.release), text(u.version), text(u.machine)].joined(separator: " ")
    }

    /// FNV-1a, 64 bits, of some bytes.
    static func fnv1a(_ bytes: some Sequence<UInt8>) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes {
            h ^= UInt64(b)
            h = h &* 0x0000_0100_0000_01b3
        }
        return h
    }
}
#endif
