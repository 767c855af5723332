// Runs a model trained in Python, as a Swift app that ships it would: the checkpoint is
// `lucid.save(model.state_dict(), path)`'s file, loaded into the same layers (PyTorch's
// parameter names and shapes), in evaluation mode, in float32 and under autocast.
//
//     swift run deploy mlp|cnn <folder> [--device cpu|metal]
//
// Reads <folder>/model.safetensors and <folder>/input.safetensors (the tensor "x"), and
// writes <folder>/swift.safetensors: "float32" (the plain run) and "autocast" (the run under
// autocast: bfloat16 on the CPU, the default float16 on "metal"), for comparison with
// Python's outputs.
import LucidEngine

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Python's `nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))`.
func mlp(_ device: Device) throws -> Module {
    Sequential(try Linear(20, 32, device: device), ReLU(), try Linear(32, 5, device: device))
}

/// Python's `nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
/// nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 3))`, for [N, 1, 8, 8] input.
func cnn(_ device: Device) throws -> Module {
    Sequential(
        try Conv2d(1, 4, kernelSize: 3, padding: 1, device: device), try BatchNorm2d(4, device: device), ReLU(),
        MaxPool2d(2), Flatten(), try Linear(64, 3, device: device))
}

func fail(_ message: String) -> Never {
    print("deploy: \(message)")
    exit(1)
}

var arguments = Array(CommandLine.arguments.dropFirst())
var device = Device.cpu
if let i = arguments.firstIndex(of: "--device") {
    guard i + 1 < arguments.count, let d = Device.allCases.first(where: { $0.name == arguments[i + 1] }) else {
        fail("--device takes one of \(Device.allCases.map(\.name))")
    }
    device = d
    arguments.removeSubrange(i...(i + 1))
}
guard arguments.count == 2, let make = ["mlp": mlp, "cnn": cnn][arguments[0]] else {
    fail("usage: deploy mlp|cnn <folder> [--device cpu|metal]")
}
let folder = arguments[1]

do {
    let model = try make(device)
    // strict: a missing or unexpected key, or a shape that differs, is an error naming it.
    _ = try model.loadStateDict(try loadSafetensors("\(folder)/model.safetensors", device: device), strict: true)
    _ = model.eval()
    guard let x = try loadSafetensors("\(folder)/input.safetensors", device: device)["x"] else {
        fail("\(folder)/input.safetensors holds no tensor named x")
    }
    let plain = try model(x)
    let mixed = try withAutocast(device, dtype: device == .cpu ? .bfloat16 : nil) { try model(x) }
    try saveSafetensors(["float32": plain, "autocast": mixed], to: "\(folder)/swift.safetensors")
    print("deploy: \(arguments[0]) \(x.shape) -> \(plain.shape), autocast in \(mixed.dtype)")
} catch {
    fail("\(error)")
}
