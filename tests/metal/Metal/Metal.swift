// An emulation of the part of Apple's Metal framework that lucid's Metal backend uses, for the
// check build on Linux (`make metal-emulated`). Each declaration has the Swift signature of
// Apple's documentation page named beside it; the protocols refine AnyObject where Apple's
// refine NSObjectProtocol. Kernels run on the CPU: the MSL sources the backend compiles are
// matched with their C++ builds (MSLKernels), and a committed command buffer runs its
// commands one after another.
//
// The emulation is as strict as the real API where it can be, and stricter where a bug would
// only show on a Mac as wrong numbers: every argument a kernel declares must be bound, with
// bytes of exactly the size its parameter declares and buffers whose dtype label (when the
// backend sets one) matches its element type; offsets must be aligned; a command buffer
// commits once; the host may not touch a buffer's contents while an unfinished command
// buffer uses it; and a kernel that writes past the end of a buffer or of its threadgroup
// memory, or diverges at a barrier, fails its command buffer. Any other violation stops the
// process with a message naming it: it is a bug in the backend, never in a user's input.

import MSLKernels

#if canImport(Glibc)
import Glibc
#endif
// URL and Data (Foundation's on a Mac).
import FoundationEssentials

/// Faults a test can ask the emulated GPU for, to see that lucid notices them:
/// LUCID_METAL_EMULATION_FAULT names kernels (comma-separated) whose dispatches do nothing,
/// leaving their outputs unwritten; `compile` makes every kernel source fail to compile,
/// `compile:<File>` only the library of Kernels/<File>.metal (`compile:Softmax`), and
/// `pipeline:<kernel>` makes building that kernel's pipeline fail.
/// LUCID_METAL_EMULATION_MAX_THREADS lowers every pipeline's maxTotalThreadsPerThreadgroup
/// (Apple's GPUs give less than 1024 to a kernel that uses many registers).
/// The emulated device is an Apple silicon GPU of family Apple7 (an M1) unless told otherwise:
/// LUCID_METAL_EMULATION_FAMILIES lists the families it supports instead (the cases of
/// MTLGPUFamily, comma-separated: `mac2,common3,metal3` is an Intel or AMD GPU of a Mac), and
/// LUCID_METAL_EMULATION_EXECUTION_WIDTH sets its pipelines' threadExecutionWidth
/// (LUCID_METAL_EMULATION_DEVICE_NAME its name).
enum EmulationFaults {
    static let skipped: Set<String> = {
        guard let raw = getenv("LUCID_METAL_EMULATION_FAULT") else { return [] }
        return Set(String(cString: raw).split(separator: ",").map(String.init))
    }()
    static var compileFails: Bool { skipped.contains("compile") }
    /// Whether the library of Kernels/<unit>.metal fails to compile.
    static func compileFails(unit: String) -> Bool { skipped.contains("compile:\(unit)") }
    /// Whether building the pipeline of `kernel` fails.
    static func pipelineFails(_ kernel: String) -> Bool { skipped.contains("pipeline:\(kernel)") }
    static let maxThreads: Int = {
        guard let raw = getenv("LUCID_METAL_EMULATION_MAX_THREADS"), let n = Int(String(cString: raw)), n > 0 else { return 1024 }
        return min(n, 1024)
    }()
    static let executionWidth: Int = {
        guard let raw = getenv("LUCID_METAL_EMULATION_EXECUTION_WIDTH"), let n = Int(String(cString: raw)), n > 0 else { return 32 }
        return n
    }()
    /// The families the emulated device supports: by default those of an M1 (Apple1 to Apple7,
    /// Mac2 as Apple silicon in a Mac reports, Common1 to Common3 and Metal3).
    static let families: Set<MTLGPUFamily> = {
        guard let raw = getenv("LUCID_METAL_EMULATION_FAMILIES") else {
            return Set((1...7).compactMap { MTLGPUFamily(rawValue: 1000 + $0) } + [.mac2, .common1, .common2, .common3, .metal3])
        }
        return Set(
            String(cString: raw).split(separator: ",").map { name in
                guard let f = MTLGPUFamily.allCases.first(where: { "\($0)" == name }) else {
                    metalMisuse("LUCID_METAL_EMULATION_FAMILIES: unknown GPU family '\(name)'")
                }
                return f
            })
    }()
}

/// The order in which committed command buffers complete. Metal promises only that a command
/// buffer starts after the ones committed before it on its queue: a later one may complete
/// first. By default the emulation completes each command buffer when it is committed;
/// `LUCID_METAL_EMULATION_COMPLETION=shuffled` (or `EmulatedCompletion.shuffled = true`, for
/// the emulation's own tests) holds completions back and delivers them out of commit order.
/// A command buffer's commands still run at commit, in commit order (as Metal's hazard
/// tracking orders work that depends on earlier work); what is held back is its completion:
/// its status, the end of its bindings (a held buffer's memory stays off limits to the host)
/// and its completion handlers. Up to `held` command buffers are held; when one more is
/// committed, one of them, chosen by a generator of fixed seed (so that a run is repeatable),
/// completes. `waitUntilCompleted()` completes its own command buffer and no other.
public enum EmulatedCompletion {
    public static let held = 3
    nonisolated(unsafe) private static var state: (shuffled: Bool, seed: UInt64) = (
        getenv("LUCID_METAL_EMULATION_COMPLETION").map { String(cString: $0) == "shuffled" } ?? false,
        0x9E37_79B9_7F4A_7C15
    )
    nonisolated(unsafe) private static var pending: [EmulatedCommandBuffer] = []
    nonisolated(unsafe) private static let lock: UnsafeMutablePointer<pthread_mutex_t> = {
        let m = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        pthread_mutex_init(m, nil)
        return m
    }()

    static func locked<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(lock)
        defer { pthread_mutex_unlock(lock) }
        return body()
    }

    /// Whether completions are shuffled. Turning it off completes the held command buffers.
    public static var shuffled: Bool {
        get { locked { state.shuffled } }
        set {
            let held = locked { () -> [EmulatedCommandBuffer] in
                state.shuffled = newValue
                defer { if !newValue { pending.removeAll() } }
                return newValue ? [] : pending
            }
            held.forEach { $0.complete() }
        }
    }

    /// Takes a committed command buffer whose commands have run: true when it is held (it
    /// completes later), false when it is to complete now. Completes a held one, chosen at
    /// random, when more than `held` are held.
    static func committed(_ buffer: EmulatedCommandBuffer) -> Bool {
        let (keep, done) = locked { () -> (Bool, EmulatedCommandBuffer?) in
            guard state.shuffled else { return (false, nil) }
            pending.append(buffer)
            guard pending.count > held else { return (true, nil) }
            // xorshift64*
            state.seed ^= state.seed >> 12
            state.seed ^= state.seed << 25
            state.seed ^= state.seed >> 27
            let pick = Int((state.seed &* 0x2545_F491_4F6C_DD1D) >> 33) % pending.count
            return (true, pending.remove(at: pick))
        }
        done?.complete()
        return keep
    }

    /// Takes `buffer` out of the held ones: true when it was held (the caller completes it).
    static func release(_ buffer: EmulatedCommandBuffer) -> Bool {
        locked {
            guard let i = pending.firstIndex(where: { $0 === buffer }) else { return false }
            pending.remove(at: i)
            return true
        }
    }
}

/// Stops the check build on a misuse of the Metal API.
func metalMisuse(_ message: String, file: StaticString = #fileID, line: UInt = #line) -> Never {
    fatalError("Metal emulation: \(message)", file: file, line: line)
}

// documentation/metal/mtlsize
public struct MTLSize: Sendable {
    public var width: Int
    public var height: Int
    public var depth: Int
    public init() { (width, height, depth) = (0, 0, 0) }
    public init(width: Int, height: Int, depth: Int) { (self.width, self.height, self.depth) = (width, height, depth) }
}

// documentation/metal/mtlresourceoptions
public struct MTLResourceOptions: OptionSet, Sendable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    public static let storageModeShared = MTLResourceOptions([])
    public static let storageModeManaged = MTLResourceOptions(rawValue: 1 << 4)
    public static let storageModePrivate = MTLResourceOptions(rawValue: 2 << 4)
}

// documentation/metal/mtlstoragemode
public enum MTLStorageMode: UInt, Sendable { case shared = 0, managed = 1, `private` = 2, memoryless = 3 }

// documentation/metal/mtlcommandbufferstatus
public enum MTLCommandBufferStatus: UInt, Sendable {
    case notEnqueued = 0, enqueued = 1, committed = 2, scheduled = 3, completed = 4, error = 5
}

// documentation/metal/mtlgpufamily (the raw values of MTLGPUFamily in the SDK's MTLDevice.h)
public enum MTLGPUFamily: Int, Sendable, CaseIterable {
    case apple1 = 1001, apple2 = 1002, apple3 = 1003, apple4 = 1004, apple5 = 1005, apple6 = 1006, apple7 = 1007,
        apple8 = 1008, apple9 = 1009
    case mac2 = 2002
    case common1 = 3001, common2 = 3002, common3 = 3003
    case metal3 = 5001
}

// documentation/metal/mtllanguageversion
public enum MTLLanguageVersion: UInt, Sendable {
    case version3_0 = 196608, version3_1 = 196609
}

// documentation/metal/mtlcompileoptions
public final class MTLCompileOptions {
    public init() {}
    // documentation/metal/mtlcompileoptions/fastmathenabled
    public var fastMathEnabled: Bool = true
    // documentation/metal/mtlcompileoptions/languageversion
    public var languageVersion: MTLLanguageVersion = .version3_1
}

/// What makeLibrary and makeComputePipelineState throw (Apple's throw NSError).
public struct MTLEmulationError: Error, CustomStringConvertible {
    public let description: String
}

// documentation/metal/mtlresource
public protocol MTLResource: AnyObject {
    var label: String? { get set }
    var storageMode: MTLStorageMode { get }
}

// documentation/metal/mtlbuffer
public protocol MTLBuffer: MTLResource {
    // documentation/metal/mtlbuffer/length
    var length: Int { get }
    // documentation/metal/mtlbuffer/contents()
    func contents() -> UnsafeMutableRawPointer
}

// documentation/metal/mtlfunction
public protocol MTLFunction: AnyObject {
    var name: String { get }
}

// documentation/metal/mtllibrary
public protocol MTLLibrary: AnyObject {
    // documentation/metal/mtllibrary/functionnames
    var functionNames: [String] { get }
    // documentation/metal/mtllibrary/makefunction(name:)
    func makeFunction(name functionName: String) -> (any MTLFunction)?
}

// documentation/metal/mtlcomputepipelinestate
public protocol MTLComputePipelineState: AnyObject {
    var maxTotalThreadsPerThreadgroup: Int { get }
    var threadExecutionWidth: Int { get }
}

// documentation/metal/mtlcommandencoder
public protocol MTLCommandEncoder: AnyObject {
    // documentation/metal/mtlcommandencoder/endencoding()
    func endEncoding()
}

// documentation/metal/mtlcomputecommandencoder
public protocol MTLComputeCommandEncoder: MTLCommandEncoder {
    // documentation/metal/mtlcomputecommandencoder/setcomputepipelinestate(_:)
    func setComputePipelineState(_ state: any MTLComputePipelineState)
    // documentation/metal/mtlcomputecommandencoder/setbuffer(_:offset:index:)
    func setBuffer(_ buffer: (any MTLBuffer)?, offset: Int, index: Int)
    // documentation/metal/mtlcomputecommandencoder/setbytes(_:length:index:)
    func setBytes(_ bytes: UnsafeRawPointer, length: Int, index: Int)
    // documentation/metal/mtlcomputecommandencoder/setthreadgroupmemorylength(_:index:)
    func setThreadgroupMemoryLength(_ length: Int, index: Int)
    // documentation/metal/mtlcomputecommandencoder/dispatchthreads(_:threadsperthreadgroup:)
    func dispatchThreads(_ threadsPerGrid: MTLSize, threadsPerThreadgroup: MTLSize)
    // documentation/metal/mtlcomputecommandencoder/dispatchthreadgroups(_:threadsperthreadgroup:)
    func dispatchThreadgroups(_ threadgroupsPerGrid: MTLSize, threadsPerThreadgroup: MTLSize)
}

// documentation/metal/mtlcommandbufferhandler
public typealias MTLCommandBufferHandler = @Sendable (any MTLCommandBuffer) -> Void

// documentation/metal/mtlcommandbuffer
public protocol MTLCommandBuffer: AnyObject {
    var status: MTLCommandBufferStatus { get }
    var error: (any Error)? { get }
    // documentation/metal/mtlcommandbuffer/makecomputecommandencoder()
    func makeComputeCommandEncoder() -> (any MTLComputeCommandEncoder)?
    // documentation/metal/mtlcommandbuffer/addcompletedhandler(_:)
    func addCompletedHandler(_ block: @escaping MTLCommandBufferHandler)
    // documentation/metal/mtlcommandbuffer/commit()
    func commit()
    // documentation/metal/mtlcommandbuffer/waituntilcompleted()
    func waitUntilCompleted()
}

// documentation/metal/mtlcommandqueue
public protocol MTLCommandQueue: AnyObject {
    // documentation/metal/mtlcommandqueue/makecommandbuffer()
    func makeCommandBuffer() -> (any MTLCommandBuffer)?
}

// documentation/metal/mtldevice
public protocol MTLDevice: AnyObject {
    var name: String { get }
    var hasUnifiedMemory: Bool { get }
    var maxThreadsPerThreadgroup: MTLSize { get }
    // documentation/metal/mtldevice/maxthreadgroupmemorylength
    var maxThreadgroupMemoryLength: Int { get }
    // documentation/metal/mtldevice/supportsfamily(_:)
    func supportsFamily(_ gpuFamily: MTLGPUFamily) -> Bool
    // documentation/metal/mtldevice/makecommandqueue()
    func makeCommandQueue() -> (any MTLCommandQueue)?
    // documentation/metal/mtldevice/makebuffer(length:options:)
    func makeBuffer(length: Int, options: MTLResourceOptions) -> (any MTLBuffer)?
    // documentation/metal/mtldevice/makelibrary(source:options:)
    func makeLibrary(source: String, options: MTLCompileOptions?) throws -> any MTLLibrary
    // documentation/metal/mtldevice/makelibrary(url:)
    func makeLibrary(URL url: URL) throws -> any MTLLibrary
    // documentation/metal/mtldevice/makecomputepipelinestate(function:)
    func makeComputePipelineState(function: any MTLFunction) throws -> any MTLComputePipelineState
}

// documentation/metal/1433401-mtlcreatesystemdefaultdevice
public func MTLCreateSystemDefaultDevice() -> (any MTLDevice)? { EmulatedDevice.shared }

// MARK: - The emulation

final class EmulatedDevice: MTLDevice, @unchecked Sendable {
    static let shared = EmulatedDevice()
    /// LUCID_METAL_EMULATION_DEVICE_NAME names another device (a test of what lucid keys by it).
    let name = getenv("LUCID_METAL_EMULATION_DEVICE_NAME").map { String(cString: $0) } ?? "lucid Metal emulation"
    let hasUnifiedMemory = true
    let maxThreadsPerThreadgroup = MTLSize(width: 1024, height: 1024, depth: 64)
    let maxThreadgroupMemoryLength = 32768  // Apple GPUs' 32 KB
    /// Every compiled kernel, by name.
    let kernels: [String: UnsafePointer<lucid_msl_kernel>]
    /// The .metal file of each library's source, by the source's FNV-1a 64 hash.
    let units: [UInt64: String]

    private init() {
        var count: Int32 = 0
        let table = lucid_msl_kernels(&count)!
        var byName: [String: UnsafePointer<lucid_msl_kernel>] = [:]
        for i in 0..<Int(count) { byName[String(cString: table[i].name)] = table + i }
        kernels = byName
        units = Dictionary(
            byName.values.map { ($0.pointee.unit_hash, String(cString: $0.pointee.unit)) }, uniquingKeysWith: { first, _ in first })
    }

    func supportsFamily(_ gpuFamily: MTLGPUFamily) -> Bool { EmulationFaults.families.contains(gpuFamily) }

    func makeCommandQueue() -> (any MTLCommandQueue)? { EmulatedQueue() }

    func makeBuffer(length: Int, options: MTLResourceOptions) -> (any MTLBuffer)? {
        guard length > 0 else { return nil }  // Metal returns nil for a zero length
        if options.contains(.storageModePrivate) {
            metalMisuse("lucid's buffers must be shared (unified memory): private storage was asked for")
        }
        return EmulatedBuffer(length: length)
    }

    func makeLibrary(source: String, options: MTLCompileOptions?) throws -> any MTLLibrary {
        guard let options, !options.fastMathEnabled else {
            throw MTLEmulationError(description: "lucid's kernels must be compiled with fastMathEnabled = false (IEEE NaN and infinity handling)")
        }
        guard options.languageVersion == .version3_1 else {
            throw MTLEmulationError(description: "lucid's kernels use bfloat, which needs languageVersion = .version3_1")
        }
        if EmulationFaults.compileFails {
            throw MTLEmulationError(description: "Compilation failed: \n\nprogram_source:1:1: error: injected by LUCID_METAL_EMULATION_FAULT=compile")
        }
        let hash =
            source.utf8.withContiguousStorageIfAvailable { lucid_msl_hash($0.baseAddress, $0.count) }
            ?? Array(source.utf8).withUnsafeBytes { lucid_msl_hash($0.baseAddress, $0.count) }
        if let unit = units[hash], EmulationFaults.compileFails(unit: unit) {
            throw MTLEmulationError(
                description:
                    "Compilation failed: \n\nprogram_source:12:5: error: use of undeclared identifier 'broken' "
                    + "(injected into \(unit).metal by LUCID_METAL_EMULATION_FAULT=compile:\(unit))")
        }
        return try library(unitHash: hash) {
            "no compiled kernels match this source: the check build's C++ kernels are out of date (run make metal-emulated) or the "
                + "source is not one of the .metal files"
        }
    }

    /// The emulation's stand-in for a `.metallib` file, which `tools/build_metallibs.py
    /// --emulated` writes: it holds no GPU code (the emulation runs none), only lines that name
    /// the source it stands for, whose kernels the check build compiled as C++:
    ///
    ///     lucid-emulated-metallib 1
    ///     family <the kernel family>
    ///     source-fnv1a64 <FNV-1a 64 of the library's joined source, 16 hex digits>
    ///     compile <the flags Apple's Metal compiler would have been given>
    ///
    /// Loading one gives the kernels of that source, as loading a real library gives the
    /// functions compiled into it. Any other file is refused, as Metal refuses a file that is not
    /// a library; so is one whose compile flags leave fast math on (the emulation's check of
    /// `fastMathEnabled`, for a library compiled ahead of time).
    func makeLibrary(URL url: URL) throws -> any MTLLibrary {
        let path = url.path
        guard let data = try? Data(contentsOf: url) else {
            throw MTLEmulationError(description: "Error reading library file \(path): no such file or it cannot be read")
        }
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.first == "lucid-emulated-metallib 1" else {
            throw MTLEmulationError(description: "Invalid library file \(path): not a library the emulation can load")
        }
        var fields: [String: String] = [:]
        for line in lines.dropFirst() where !line.isEmpty {
            let parts = line.split(separator: " ", maxSplits: 1)
            fields[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
        }
        guard let hex = fields["source-fnv1a64"], hex.count == 16, let hash = UInt64(hex, radix: 16) else {
            throw MTLEmulationError(description: "Invalid library file \(path): no source-fnv1a64 line")
        }
        let flags = (fields["compile"] ?? "").split(separator: " ")
        guard flags.contains("-fno-fast-math"), flags.contains("-std=metal3.1") else {
            throw MTLEmulationError(
                description:
                    "lucid's kernels must be compiled with -std=metal3.1 and -fno-fast-math; \(path) was compiled with '\(fields["compile"] ?? "")'")
        }
        return try library(unitHash: hash) {
            "\(path) stands for a source whose kernels the check build did not compile (other sources than the .metal files)"
        }
    }

    private func library(unitHash hash: UInt64, _ missing: () -> String) throws -> any MTLLibrary {
        let names = kernels.filter { $0.value.pointee.unit_hash == hash }.map(\.key).sorted()
        if names.isEmpty { throw MTLEmulationError(description: missing()) }
        return EmulatedLibrary(functionNames: names)
    }

    func makeComputePipelineState(function: any MTLFunction) throws -> any MTLComputePipelineState {
        guard let f = function as? EmulatedFunction else { metalMisuse("a function from another device") }
        if EmulationFaults.pipelineFails(f.name) {
            throw MTLEmulationError(
                description: "Compiler encountered an internal error building \(f.name) (injected by LUCID_METAL_EMULATION_FAULT=pipeline:\(f.name))")
        }
        return EmulatedPipeline(kernel: f.kernel)
    }
}

final class EmulatedBuffer: MTLBuffer, @unchecked Sendable {
    let length: Int
    let storageMode = MTLStorageMode.shared
    var label: String?
    private let memory: UnsafeMutableRawPointer
    /// Bindings in unfinished command buffers that may write this buffer (non-const
    /// parameters, MPS results), and that only read it.
    var pendingWrites = 0
    var pendingReads = 0

    /// Bytes after the buffer's end that must keep their pattern: a kernel that writes past
    /// the end of a buffer (which on a GPU silently corrupts another allocation) is caught.
    static let guardBytes = 64
    static let guardPattern: UInt8 = 0xA5

    init(length: Int) {
        self.length = length
        // Page-aligned like Metal's allocations; zeroed so that a stray read is deterministic.
        var p: UnsafeMutableRawPointer?
        guard posix_memalign(&p, 16384, length + Self.guardBytes) == 0, let p else {
            metalMisuse("out of memory for \(length) bytes")
        }
        memset(p, 0, length)
        memset(p + length, Int32(Self.guardPattern), Self.guardBytes)
        memory = p
    }

    /// Whether something wrote past the end of the buffer.
    var overrun: Bool {
        let tail = (memory + length).assumingMemoryBound(to: UInt8.self)
        return (0..<Self.guardBytes).contains { tail[$0] != Self.guardPattern }
    }

    deinit {
        if pendingWrites > 0 { metalMisuse("a buffer was freed while a command buffer still writes it") }
        free(memory)
    }

    func contents() -> UnsafeMutableRawPointer {
        if pendingWrites > 0 {
            metalMisuse(
                "contents() of a buffer "
                    + "(\(label ?? "unlabelled"), \(length) bytes) that an unfinished command buffer writes: the host would race the GPU; "
                    + "wait for it to complete first"
            )
        }
        // Stricter than Metal: a host read of a buffer the GPU only reads is safe, but lucid
        // touches buffers from the host only to write new tensors or after a synchronize, so
        // this catches a new tensor's memory that queued kernels still read.
        if pendingReads > 0 {
            metalMisuse(
                "contents() of a buffer "
                    + "(\(label ?? "unlabelled"), \(length) bytes) that an unfinished command buffer reads: a host write would change what "
                    + "the GPU reads; wait for it to complete first"
            )
        }
        return memory
    }

    /// The memory, for the emulated GPU itself.
    var gpuAddress: UnsafeMutableRawPointer { memory }
}

/// The memory of a buffer as the emulated GPU sees it, for the other emulated frameworks
/// (Metal Performance Shaders); not part of Metal's API.
public func emulatedContents(_ buffer: any MTLBuffer) -> UnsafeMutableRawPointer {
    guard let b = buffer as? EmulatedBuffer else { metalMisuse("a buffer from another device") }
    return b.gpuAddress
}

final class EmulatedFunction: MTLFunction {
    let name: String
    let kernel: UnsafePointer<lucid_msl_kernel>
    init(name: String, kernel: UnsafePointer<lucid_msl_kernel>) { (self.name, self.kernel) = (name, kernel) }
}

final class EmulatedLibrary: MTLLibrary {
    let functionNames: [String]
    init(functionNames: [String]) { self.functionNames = functionNames }

    func makeFunction(name functionName: String) -> (any MTLFunction)? {
        guard functionNames.contains(functionName), let k = EmulatedDevice.shared.kernels[functionName] else { return nil }
        return EmulatedFunction(name: functionName, kernel: k)
    }
}

final class EmulatedPipeline: MTLComputePipelineState {
    let kernel: UnsafePointer<lucid_msl_kernel>
    let maxTotalThreadsPerThreadgroup = EmulationFaults.maxThreads
    let threadExecutionWidth = EmulationFaults.executionWidth
    init(kernel: UnsafePointer<lucid_msl_kernel>) { self.kernel = kernel }
}

final class EmulatedQueue: MTLCommandQueue {
    func makeCommandBuffer() -> (any MTLCommandBuffer)? { EmulatedCommandBuffer() }
}

/// One recorded command: runs when its command buffer is committed.
public protocol EmulatedCommand {
    func run() throws
}

public final class EmulatedCommandBuffer: MTLCommandBuffer {
    public private(set) var status = MTLCommandBufferStatus.notEnqueued
    public private(set) var error: (any Error)?
    private var commands: [any EmulatedCommand] = []
    private var completedHandlers: [MTLCommandBufferHandler] = []
    private var written: [EmulatedBuffer] = []
    private var retained: [EmulatedBuffer] = []
    private var openEncoder: EmulatedComputeEncoder?

    public func makeComputeCommandEncoder() -> (any MTLComputeCommandEncoder)? {
        if status != .notEnqueued { metalMisuse("makeComputeCommandEncoder() on a command buffer that was already committed") }
        if openEncoder != nil { metalMisuse("a second encoder on a command buffer whose encoder has not ended (endEncoding())") }
        let e = EmulatedComputeEncoder(owner: self)
        openEncoder = e
        return e
    }

    /// For MPS kernels, which encode straight into the command buffer: `writes` are the
    /// buffers the command writes (the others it only reads).
    public func record(_ command: any EmulatedCommand, writes: [any MTLBuffer]) {
        if status != .notEnqueued { metalMisuse("encoding into a command buffer that was already committed") }
        if openEncoder != nil { metalMisuse("encoding a kernel while a compute encoder is open (call endEncoding() first)") }
        for b in writes { use(b, writing: true) }
        commands.append(command)
    }

    /// Keeps `buffer` alive until the command buffer completes (as Metal's retained references
    /// do) and, when the GPU may write it, marks it off limits to the host until then.
    func use(_ buffer: any MTLBuffer, writing: Bool) {
        guard let b = buffer as? EmulatedBuffer else { metalMisuse("a buffer from another device") }
        if writing {
            b.pendingWrites += 1
            written.append(b)
        } else {
            b.pendingReads += 1
            retained.append(b)
        }
    }

    func append(_ command: any EmulatedCommand) { commands.append(command) }

    func encoderEnded(_ e: EmulatedComputeEncoder) {
        if openEncoder !== e { metalMisuse("endEncoding() of an encoder that is not this command buffer's open one") }
        openEncoder = nil
    }

    public func addCompletedHandler(_ block: @escaping MTLCommandBufferHandler) {
        if status != .notEnqueued { metalMisuse("addCompletedHandler(_:) after commit()") }
        completedHandlers.append(block)
    }

    /// The outcome of the commands, once run: the status the command buffer takes when it
    /// completes.
    private var outcome = MTLCommandBufferStatus.completed
    /// Whether it has completed (under `EmulatedCompletion`'s lock).
    private var finished = false

    /// Runs the commands at once, then completes: at once (the emulated GPU is done when
    /// commit returns), or later, out of commit order, when `EmulatedCompletion` holds it.
    public func commit() {
        if status != .notEnqueued { metalMisuse("commit() of a command buffer that was already committed") }
        if openEncoder != nil { metalMisuse("commit() while an encoder has not ended (endEncoding())") }
        status = .committed
        do {
            for c in commands { try c.run() }
        } catch let e {
            error = e
            outcome = .error
        }
        commands.removeAll()
        if !EmulatedCompletion.committed(self) { complete() }
    }

    /// Sets the final status, ends the bindings (the host may touch the buffers again), then
    /// runs the completion handlers, in the order they were added.
    func complete() {
        status = outcome
        for b in written { b.pendingWrites -= 1 }
        for b in retained { b.pendingReads -= 1 }
        written.removeAll()
        retained.removeAll()
        EmulatedCompletion.locked { finished = true }
        let handlers = completedHandlers
        completedHandlers.removeAll()
        for h in handlers { h(self) }
    }

    public func waitUntilCompleted() {
        if status == .notEnqueued { metalMisuse("waitUntilCompleted() on a command buffer that was never committed (it would wait forever)") }
        if EmulatedCompletion.release(self) { complete() }
        // Held back and completing on another thread: wait for its bindings to end.
        while !EmulatedCompletion.locked({ finished }) { usleep(50) }
    }
}

/// The dtype a buffer holds, from the label lucid's backend gives it ("lucid:float16"), and
/// the MSL element type that matches.
private func labelledType(_ label: String?) -> String? {
    guard let label, label.hasPrefix("lucid:") else { return nil }
    switch label.dropFirst(6) {
    case "float32": return "float"
    case "float16": return "half"
    case "bfloat16": return "bfloat"
    case "int32": return "int"
    case "int64": return "long"
    case "bool": return "uchar"
    default: return nil
    }
}

final class EmulatedComputeEncoder: MTLComputeCommandEncoder {
    // Strong, as Metal's encoders keep their command buffer: the cycle ends at endEncoding().
    private let owner: EmulatedCommandBuffer
    private var pipeline: EmulatedPipeline?
    private var buffers: [Int: (EmulatedBuffer, Int)] = [:]
    private var bytes: [Int: [UInt8]] = [:]
    private var threadgroupLengths: [Int: Int] = [:]
    private var ended = false

    init(owner: EmulatedCommandBuffer) { self.owner = owner }

    private func checkOpen(_ what: String) {
        if ended { metalMisuse("\(what) after endEncoding()") }
    }

    func setComputePipelineState(_ state: any MTLComputePipelineState) {
        checkOpen("setComputePipelineState")
        guard let p = state as? EmulatedPipeline else { metalMisuse("a pipeline from another device") }
        pipeline = p
    }

    func setBuffer(_ buffer: (any MTLBuffer)?, offset: Int, index: Int) {
        checkOpen("setBuffer")
        guard (0..<31).contains(index) else { metalMisuse("buffer index \(index) outside 0..<31") }
        guard let buffer else { buffers[index] = nil; return }
        guard let b = buffer as? EmulatedBuffer else { metalMisuse("a buffer from another device") }
        guard offset >= 0, offset < b.length else {
            metalMisuse("setBuffer offset \(offset) outside the buffer's \(b.length) bytes (index \(index))")
        }
        buffers[index] = (b, offset)
        bytes[index] = nil
    }

    func setBytes(_ pointer: UnsafeRawPointer, length: Int, index: Int) {
        checkOpen("setBytes")
        guard (0..<31).contains(index) else { metalMisuse("bytes index \(index) outside 0..<31") }
        guard length > 0, length <= 4096 else { metalMisuse("setBytes of \(length) bytes: Metal takes 1...4096 (use a buffer beyond 4 KB)") }
        bytes[index] = Array(UnsafeRawBufferPointer(start: pointer, count: length))
        buffers[index] = nil
    }

    func setThreadgroupMemoryLength(_ length: Int, index: Int) {
        checkOpen("setThreadgroupMemoryLength")
        guard (0..<31).contains(index) else { metalMisuse("threadgroup memory index \(index) outside 0..<31") }
        guard length > 0, length % 16 == 0 else {
            metalMisuse("setThreadgroupMemoryLength(\(length), index: \(index)): the length must be a positive multiple of 16 bytes")
        }
        threadgroupLengths[index] = length
    }

    func dispatchThreads(_ threadsPerGrid: MTLSize, threadsPerThreadgroup: MTLSize) {
        let groups = MTLSize(
            width: (threadsPerGrid.width + threadsPerThreadgroup.width - 1) / max(1, threadsPerThreadgroup.width),
            height: (threadsPerGrid.height + threadsPerThreadgroup.height - 1) / max(1, threadsPerThreadgroup.height),
            depth: (threadsPerGrid.depth + threadsPerThreadgroup.depth - 1) / max(1, threadsPerThreadgroup.depth))
        dispatch(grid: threadsPerGrid, groups: groups, perGroup: threadsPerThreadgroup)
    }

    func dispatchThreadgroups(_ threadgroupsPerGrid: MTLSize, threadsPerThreadgroup: MTLSize) {
        let grid = MTLSize(
            width: threadgroupsPerGrid.width * threadsPerThreadgroup.width,
            height: threadgroupsPerGrid.height * threadsPerThreadgroup.height,
            depth: threadgroupsPerGrid.depth * threadsPerThreadgroup.depth)
        dispatch(grid: grid, groups: threadgroupsPerGrid, perGroup: threadsPerThreadgroup)
    }

    private func dispatch(grid: MTLSize, groups: MTLSize, perGroup: MTLSize) {
        checkOpen("dispatch")
        guard let pipeline else { metalMisuse("dispatch without a compute pipeline state") }
        let k = pipeline.kernel.pointee
        let name = String(cString: k.name)
        let total = perGroup.width * perGroup.height * perGroup.depth
        guard perGroup.width > 0, perGroup.height > 0, perGroup.depth > 0, total <= pipeline.maxTotalThreadsPerThreadgroup else {
            metalMisuse(
                "\(name): \(perGroup.width)×\(perGroup.height)×\(perGroup.depth) threads per threadgroup (at most "
                    + "\(pipeline.maxTotalThreadsPerThreadgroup) in all)"
            )
        }
        guard [grid.width, grid.height, grid.depth].allSatisfy({ $0 > 0 && $0 <= Int(UInt32.max) }) else {
            metalMisuse("\(name): grid \(grid.width)×\(grid.height)×\(grid.depth) is empty or too large")
        }
        var args: [Arg] = []
        var threadgroupMemory = 0
        for i in 0..<Int(k.param_count) {
            let p = k.params[i]
            let pname = String(cString: p.name), ptype = String(cString: p.type), index = Int(p.index)
            switch Int32(p.kind) {
            case Int32(LUCID_MSL_DEVICE_POINTER):
                guard let (b, offset) = buffers[index] else {
                    metalMisuse("\(name): parameter '\(pname)' (device \(ptype)*, buffer \(index)) is not bound to a buffer")
                }
                if offset % Int(p.size) != 0 {
                    metalMisuse("\(name): '\(pname)' offset \(offset) is not a multiple of sizeof(\(ptype)) = \(p.size)")
                }
                // (An atomic<T> parameter takes a buffer of T.)
                if let t = labelledType(b.label), t != ptype, "atomic_\(t)" != ptype {
                    metalMisuse("\(name): '\(pname)' is declared device \(ptype)* but the bound buffer holds \(b.label ?? "?")")
                }
                if b.length - offset < Int(p.size) {
                    metalMisuse("\(name): '\(pname)' has fewer than one \(ptype) left after offset \(offset)")
                }
                owner.use(b, writing: p.is_const == 0)
                args.append(.buffer(b, offset, writing: p.is_const == 0))
            case Int32(LUCID_MSL_CONSTANT_REF):
                if let data = bytes[index] {
                    if data.count != Int(p.size) {
                        metalMisuse(
                            "\(name): '\(pname)' is declared constant \(ptype)& (\(p.size) bytes) but \(data.count) bytes were bound with setBytes")
                    }
                    args.append(.bytes(data))
                } else if let (b, offset) = buffers[index] {
                    if offset % 256 != 0 { metalMisuse("\(name): '\(pname)' constant buffer offset \(offset) is not a multiple of 256") }
                    if b.length - offset < Int(p.size) { metalMisuse("\(name): '\(pname)' needs \(p.size) bytes after offset \(offset)") }
                    owner.use(b, writing: false)
                    args.append(.buffer(b, offset, writing: false))
                } else {
                    metalMisuse("\(name): parameter '\(pname)' (constant \(ptype)&, buffer \(index)) is not bound")
                }
            case Int32(LUCID_MSL_THREADGROUP):
                guard let length = threadgroupLengths[index] else {
                    metalMisuse(
                        "\(name): parameter '\(pname)' (threadgroup \(ptype)*, threadgroup \(index)) has no memory: call "
                            + "setThreadgroupMemoryLength first"
                    )
                }
                if length < Int(p.size) {
                    metalMisuse("\(name): '\(pname)' has \(length) bytes of threadgroup memory, less than one \(ptype)")
                }
                threadgroupMemory += length
                args.append(.threadgroup(length))
            default:
                args.append(.none)
            }
        }
        if threadgroupMemory > EmulatedDevice.shared.maxThreadgroupMemoryLength {
            metalMisuse(
                "\(name): \(threadgroupMemory) bytes of threadgroup memory, more than the device's "
                    + "\(EmulatedDevice.shared.maxThreadgroupMemoryLength)"
            )
        }
        owner.append(
            DispatchCommand(
                kernel: pipeline.kernel, args: args,
                grid: lucid_msl_size(x: UInt32(grid.width), y: UInt32(grid.height), z: UInt32(grid.depth)),
                groups: lucid_msl_size(x: UInt32(groups.width), y: UInt32(groups.height), z: UInt32(groups.depth)),
                perGroup: lucid_msl_size(x: UInt32(perGroup.width), y: UInt32(perGroup.height), z: UInt32(perGroup.depth))))
    }

    func endEncoding() {
        checkOpen("endEncoding")
        ended = true
        owner.encoderEnded(self)
    }

    enum Arg {
        case buffer(EmulatedBuffer, Int, writing: Bool)
        case bytes([UInt8])
        case threadgroup(Int)
        case none
    }

    struct DispatchCommand: EmulatedCommand {
        let kernel: UnsafePointer<lucid_msl_kernel>
        let args: [Arg]
        let grid: lucid_msl_size, groups: lucid_msl_size, perGroup: lucid_msl_size

        func run() throws {
            if EmulationFaults.skipped.contains(String(cString: kernel.pointee.name)) { return }
            // Bytes are copied into 16-byte-aligned storage, as the GPU's constant memory is.
            var owned: [UnsafeMutableRawPointer] = []
            defer { owned.forEach { free($0) } }
            var pointers: [UnsafeMutableRawPointer?] = []
            var lengths: [UInt32] = []
            for a in args {
                lengths.append(0)
                switch a {
                case .buffer(let b, let offset, _): pointers.append(b.gpuAddress + offset)
                case .bytes(let data):
                    var p: UnsafeMutableRawPointer?
                    guard posix_memalign(&p, 16, data.count) == 0, let p else { metalMisuse("out of memory") }
                    data.withUnsafeBytes { p.copyMemory(from: $0.baseAddress!, byteCount: data.count) }
                    owned.append(p)
                    pointers.append(p)
                case .threadgroup(let length):
                    pointers.append(nil)
                    lengths[lengths.count - 1] = UInt32(length)
                case .none: pointers.append(nil)
                }
            }
            var message = [CChar](repeating: 0, count: 512)
            let status = pointers.withUnsafeBufferPointer { ptrs in
                ptrs.baseAddress!.withMemoryRebound(to: UnsafeMutableRawPointer?.self, capacity: ptrs.count) { base in
                    lucid_msl_dispatch(kernel, UnsafePointer(base), lengths, grid, groups, perGroup, &message, message.count)
                }
            }
            if status != 0 {
                throw MTLEmulationError(description: message.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
            }
            for case .buffer(let b, _, writing: true) in args where b.overrun {
                throw MTLEmulationError(
                    description:
                        "kernel \(String(cString: kernel.pointee.name)) wrote past the end of a \(b.length)-byte buffer (\(b.label ?? "unlabelled"))")
            }
        }
    }
}
