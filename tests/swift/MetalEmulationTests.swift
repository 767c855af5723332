// The Metal emulation's strictness, in the check build only (where the MSLKernels module of
// tests/metal exists): each misuse of the Metal API that a Mac would turn into wrong numbers
// or a crash stops the process with a message naming it. Each case runs in a child process.
#if canImport(MSLKernels)
import Metal
import Testing
@testable import LucidEngine

/// A compute encoder on a fresh command buffer, with the pipeline of one of the backend's
/// kernels set.
private func encoder(for kernel: String) throws -> (any MTLDevice, any MTLCommandBuffer, any MTLComputeCommandEncoder) {
    guard let device = MTLCreateSystemDefaultDevice(), let queue = device.makeCommandQueue(),
          let commandBuffer = queue.makeCommandBuffer(), let encoder = commandBuffer.makeComputeCommandEncoder() else {
        throw LucidError.runtime("the emulated device is missing")
    }
    let options = MTLCompileOptions()
    options.fastMathEnabled = false
    let library = try device.makeLibrary(source: MetalKernelSource.library, options: options)
    guard let function = library.makeFunction(name: kernel) else { throw LucidError.runtime("no kernel \(kernel)") }
    encoder.setComputePipelineState(try device.makeComputePipelineState(function: function))
    return (device, commandBuffer, encoder)
}

/// Binds fill_float16's arguments correctly, except what `skip` names; returns its output buffer.
private func bindFill(_ device: any MTLDevice, _ e: any MTLComputeCommandEncoder, label: String = "lucid:float16",
                      skip: String = "") throws -> any MTLBuffer {
    guard let out = device.makeBuffer(length: 64, options: .storageModeShared) else { throw LucidError.runtime("no buffer") }
    out.label = label
    e.setBuffer(out, offset: 0, index: 0)
    var layout = [Int64](repeating: 0, count: 34)
    layout[0] = 1   // one dimension
    layout[1] = 4   // of four elements
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
#endif
