// The Metal emulation's strictness, in the check build only (where the MSLKernels module of
// tests/metal exists): each misuse of the Metal API that a Mac would turn into wrong numbers
// or a crash stops the process with a message naming it. Each case runs in a child process.
#if canImport(MSLKernels)
import Foundation
import Metal
import Testing
@testable import LucidEngine

/// A compute encoder on a fresh command buffer, with the pipeline of one of the backend's
/// kernels set.
private func encoder(for kernel: String) throws -> (any MTLDevice, any MTLCommandBuffer, any MTLComputeCommandEncoder) {
    guard let device = MTLCreateSystemDefaultDevice(), let queue = device.makeCommandQueue(),
        let commandBuffer = queue.makeCommandBuffer(), let encoder = commandBuffer.makeComputeCommandEncoder()
    else {
        throw LucidError.runtime("the emulated device is missing")
    }
    let options = MTLCompileOptions()
    options.fastMathEnabled = false
    // The library of the kernel's family.
    var function: (any MTLFunction)?
    for family in MetalKernelSource.families where function == nil {
        let library = try device.makeLibrary(source: MetalKernelSource.common + family.source, options: options)
        function = library.makeFunction(name: kernel)
    }
    guard let function else { throw LucidError.runtime("no kernel \(kernel)") }
    encoder.setComputePipelineState(try device.makeComputePipelineState(function: function))
    return (device, commandBuffer, encoder)
}

/// A compute encoder with the pipeline of one of the emulation's own test kernels
/// (tests/metal/EmulationTestKernels.metal), and an int32 output buffer of `count` elements
/// bound at index 0.
private func testKernel(_ kernel: String, count: Int) throws
    -> (any MTLCommandBuffer, any MTLComputeCommandEncoder, any MTLBuffer)
{
    guard let device = MTLCreateSystemDefaultDevice(), let queue = device.makeCommandQueue(),
        let commandBuffer = queue.makeCommandBuffer(), let encoder = commandBuffer.makeComputeCommandEncoder(),
        let out = device.makeBuffer(length: count * 4, options: .storageModeShared)
    else {
        throw LucidError.runtime("the emulated device is missing")
    }
    let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../metal/EmulationTestKernels.metal")
    let options = MTLCompileOptions()
    options.fastMathEnabled = false
    let library = try device.makeLibrary(source: try String(contentsOf: file, encoding: .utf8), options: options)
    guard let function = library.makeFunction(name: kernel) else { throw LucidError.runtime("no kernel \(kernel)") }
    encoder.setComputePipelineState(try device.makeComputePipelineState(function: function))
    out.label = "lucid:int32"
    encoder.setBuffer(out, offset: 0, index: 0)
    return (commandBuffer, encoder, out)
}

/// Binds fill_float16's arguments correctly, except what `skip` names; returns its output buffer.
private func bindFill(
    _ device: any MTLDevice, _ e: any MTLComputeCommandEncoder, label: String = "lucid:float16",
    skip: String = ""
) throws -> any MTLBuffer {
    guard let out = device.makeBuffer(length: 64, options: .storageModeShared) else { throw LucidError.runtime("no buffer") }
    out.label = label
    e.setBuffer(out, offset: 0, index: 0)
    var layout = [Int32](repeating: 0, count: 34)  // the kernel's Layout32 (fill_float16 is its 32-bit form)
    layout[0] = 1  // one dimension
    layout[1] = 4  // of four elements
    layout[2] = 4
    layout[10] = 1  // stride 1
    layout.withUnsafeBytes { e.setBytes($0.baseAddress!, length: $0.count, index: 1) }
    if skip != "value" {
        var value: Float = 0.5
        e.setBytes(&value, length: 4, index: 2)
    }
    return out
}

private let four = MTLSize(width: 4, height: 1, depth: 1)

/// Dispatches `threads` threads in one threadgroup, ends the encoder and runs the command buffer.
private func runOneGroup(_ threads: Int, _ e: any MTLComputeCommandEncoder, _ commandBuffer: any MTLCommandBuffer) {
    let size = MTLSize(width: threads, height: 1, depth: 1)
    e.dispatchThreads(size, threadsPerThreadgroup: size)
    e.endEncoding()
    commandBuffer.commit()
    commandBuffer.waitUntilCompleted()
}

private func errorText(_ commandBuffer: any MTLCommandBuffer) -> String {
    commandBuffer.error.map { "\($0)" } ?? ""
}

private func stderrText(_ result: ExitTest.Result?) -> String {
    String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
}

@Suite struct MetalEmulationStrictnessTests {
    @Test func aCorrectDispatchRunsAndWritesItsOutput() throws {
        let (device, commandBuffer, e) = try encoder(for: "fill_float16")
        let out = try bindFill(device, e)
        e.dispatchThreads(four, threadsPerThreadgroup: four)
        e.endEncoding()
        commandBuffer.commit()
        commandBuffer.waitUntilCompleted()
        #expect(commandBuffer.status == .completed)
        let halves = out.contents().assumingMemoryBound(to: UInt16.self)
        #expect((0..<4).allSatisfy { halves[$0] == 0x3800 })  // 0.5 in float16
    }

    @Test func bytesOfAnotherSizeThanTheParameterAreCaught() async {
        // The bug that zeroed PyTorch's MPS GradScaler: a wider value bound where the kernel
        // declares a narrower one.
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let (device, _, e) = try encoder(for: "fill_float16")
            _ = try bindFill(device, e, skip: "value")
            var value: Double = 0.5
            e.setBytes(&value, length: 8, index: 2)
            e.dispatchThreads(four, threadsPerThreadgroup: four)
        }
        #expect(stderrText(result).contains("'value' is declared constant float& (4 bytes) but 8 bytes were bound"))
    }

    @Test func aBufferOfAnotherDtypeThanTheParameterIsCaught() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let (device, _, e) = try encoder(for: "fill_float16")
            _ = try bindFill(device, e, label: "lucid:float32")
            e.dispatchThreads(four, threadsPerThreadgroup: four)
        }
        #expect(stderrText(result).contains("'out' is declared device half* but the bound buffer holds lucid:float32"))
    }

    @Test func anUnboundParameterIsCaught() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let (device, _, e) = try encoder(for: "fill_float16")
            _ = try bindFill(device, e, skip: "value")
            e.dispatchThreads(four, threadsPerThreadgroup: four)
        }
        #expect(stderrText(result).contains("parameter 'value' (constant float&, buffer 2) is not bound"))
    }

    @Test func committingTwiceIsCaught() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let (device, commandBuffer, e) = try encoder(for: "fill_float16")
            _ = try bindFill(device, e)
            e.dispatchThreads(four, threadsPerThreadgroup: four)
            e.endEncoding()
            commandBuffer.commit()
            commandBuffer.commit()
        }
        #expect(stderrText(result).contains("commit() of a command buffer that was already committed"))
    }

    @Test func barriersHoldEveryThreadOfAGroup() throws {
        let (commandBuffer, e, out) = try testKernel("barrier_exchange", count: 96)
        e.setThreadgroupMemoryLength(32 * 4, index: 0)
        e.dispatchThreads(MTLSize(width: 96, height: 1, depth: 1), threadsPerThreadgroup: MTLSize(width: 32, height: 1, depth: 1))
        e.endEncoding()
        commandBuffer.commit()
        commandBuffer.waitUntilCompleted()
        #expect(commandBuffer.status == .completed)
        let values = out.contents().assumingMemoryBound(to: Int32.self)
        #expect((0..<96).allSatisfy { values[$0] == Int32(($0 % 32 + 1) % 32) })
    }

    @Test func simdGroupCollectivesCombineTheirSIMDGroupsLanes() throws {
        let (commandBuffer, e, out) = try testKernel("simd_collectives", count: 48 * 4)
        runOneGroup(48, e, commandBuffer)
        #expect(commandBuffer.status == .completed)
        let values = out.contents().assumingMemoryBound(to: Int32.self)
        for thread in 0..<48 {
            // Threads 0–31 are one SIMD group (values 1…32), 32–47 a partial one (1…16).
            let lanes = thread < 32 ? 32 : 16, lane = thread % 32, partner = lane ^ 5
            let want = [lanes * (lanes + 1) / 2, lanes, 1, partner < lanes ? partner + 1 : lane + 1]
            #expect((0..<4).map { Int(values[thread * 4 + $0]) } == want, "thread \(thread)")
        }
    }

    @Test func threadgroupMemoryStartsPoisoned() throws {
        let (commandBuffer, e, out) = try testKernel("read_unwritten", count: 16)
        e.setThreadgroupMemoryLength(64, index: 0)
        runOneGroup(16, e, commandBuffer)
        let values = out.contents().assumingMemoryBound(to: Int32.self)
        #expect((0..<16).allSatisfy { values[$0] == -1 })
    }

    @Test func barrierDivergenceFailsTheCommandBuffer() throws {
        let (commandBuffer, e, _) = try testKernel("diverging_barrier", count: 8)
        e.setThreadgroupMemoryLength(32, index: 0)
        runOneGroup(8, e, commandBuffer)
        #expect(commandBuffer.status == .error)
        #expect(errorText(commandBuffer).contains("barrier divergence: 4 of 8 threads"))
    }

    @Test func writingPastThreadgroupMemoryFailsTheCommandBuffer() throws {
        let (commandBuffer, e, _) = try testKernel("write_past_threadgroup_memory", count: 16)
        e.setThreadgroupMemoryLength(16 * 4, index: 0)
        runOneGroup(16, e, commandBuffer)
        #expect(commandBuffer.status == .error)
        #expect(errorText(commandBuffer).contains("wrote past the 64 bytes of threadgroup memory of 'shared'"))
    }

    @Test func writingPastABufferFailsTheCommandBuffer() throws {
        let (commandBuffer, e, _) = try testKernel("write_past_buffer_end", count: 16)
        runOneGroup(16, e, commandBuffer)
        #expect(commandBuffer.status == .error)
        #expect(errorText(commandBuffer).contains("write_past_buffer_end wrote past the end of a 64-byte buffer"))
    }

    @Test func threadgroupMemoryMustBeSized() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let (_, e, _) = try testKernel("barrier_exchange", count: 32)
            e.dispatchThreads(MTLSize(width: 32, height: 1, depth: 1), threadsPerThreadgroup: MTLSize(width: 32, height: 1, depth: 1))
        }
        #expect(stderrText(result).contains("has no memory: call setThreadgroupMemoryLength first"))
    }

    @Test func threadgroupMemoryLengthsAreMultiplesOf16() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let (_, e, _) = try testKernel("barrier_exchange", count: 32)
            e.setThreadgroupMemoryLength(20, index: 0)
        }
        #expect(stderrText(result).contains("the length must be a positive multiple of 16 bytes"))
    }

    @Test func readingABufferTheGPUMayStillWriteIsCaught() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let (device, _, e) = try encoder(for: "fill_float16")
            let out = try bindFill(device, e)
            e.dispatchThreads(four, threadsPerThreadgroup: four)
            e.endEncoding()
            _ = out.contents()  // before commit and completion
        }
        #expect(stderrText(result).contains("that an unfinished command buffer writes"))
    }
}

/// The kernel libraries, one per family, and the self-test's memory of their passes.
@Suite struct MetalKernelLibraryTests {
    @Test func eachFamilysFileIsALibraryOfItsOwnWithEveryPipelineBuilt() throws {
        let gpu = try #require(Backends.metalBackend)
        let libraries = gpu.kernelLibraries
        #expect(libraries.map(\.name) == MetalKernelSource.families.map(\.name))
        for library in libraries {
            #expect(library.error == nil, "\(library.name): \(library.error ?? "")")
            #expect(!library.kernels.isEmpty, "\(library.name) has no kernels")
            #expect(library.source == MetalKernelSource.common + (MetalKernelSource.families.first { $0.name == library.name }?.source ?? ""))
            _ = library.family  // named after a family
        }
        // No kernel is in two libraries, and the fills and copies are in the core's.
        let all = libraries.flatMap(\.kernels)
        #expect(Set(all).count == all.count)
        let core = try #require(libraries.first { $0.family == MetalKernelLibrary.coreFamily })
        #expect(core.kernels.contains("fill_float32") && core.kernels.contains("copy_float16_float32"))
        #expect(gpu.foreignExecutionWidths.isEmpty)
        #expect(gpu.declinedFamilies.isEmpty)
    }

    @Test func aPassIsRememberedForItsSourceAndDeviceOnly() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lucid-cache-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = MetalSelfTestCache(directory: directory + "/nested")
        func keyOf(_ source: String, _ device: String) -> String {
            cache.key(library: MetalKernelLibrary(name: "Elementwise", source: source).identity, device: device)
        }
        let key = keyOf("kernel void a() {}", "Apple M1")
        #expect(key == keyOf("kernel void a() {}", "Apple M1"))
        #expect(key != keyOf("kernel void a() { }", "Apple M1"))
        #expect(key != keyOf("kernel void a() {}", "Apple M2"))
        #expect(!cache.passed(key))
        cache.record(key)
        #expect(cache.passed(key))
        // Another process (a new cache object) reads it from the file.
        let again = MetalSelfTestCache(directory: directory + "/nested")
        #expect(again.passed(key))
        #expect(!again.passed(keyOf("kernel void b() {}", "Apple M1")))
        // Without a directory nothing is kept.
        let off = MetalSelfTestCache(directory: nil)
        off.record(key)
        #expect(!off.passed(key))
    }

    @Test func sha256OfTheStandardsExamples() {
        // FIPS 180-4's examples (one block, two blocks) and the empty message, as manifest.json
        // (Python's hashlib) gives them; 1000 bytes cross several blocks.
        #expect(MetalPrebuilt.sha256([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(MetalPrebuilt.sha256(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            MetalPrebuilt.sha256(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(
            MetalPrebuilt.sha256([UInt8](repeating: UInt8(ascii: "a"), count: 1000))
                == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3")
    }
}
#endif
