// Trains a small MLP as a Swift app would: bfloat16 autocast on the CPU (float16 on "metal"),
// a GradScaler, Adam with a cosine learning-rate schedule and gradient clipping; then saves
// the model in the safetensors format, which Python's `lucid.load` reads.
//
//     swift run train [<folder>] [--device cpu|metal]
//
// With a folder, writes <folder>/model.safetensors (the state dict) and
// <folder>/outputs.safetensors (the inputs "x" and the trained model's "logits").
//
// The data: points in the plane, labelled by which of three rings they fall in. Exits with
// status 1 when the model does not learn them.
import LucidEngine

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

func fail(_ message: String) -> Never {
    print("train: \(message)")
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
let folder = arguments.first

do {
    Tensor.manualSeed(0)
    // 512 points: radius in [0, 3), the label is the ring (0, 1 or 2).
    let count = 512
    let angle = try Tensor.rand([count], device: device) * (2 * Double.pi)
    let radius = try Tensor.rand([count], device: device) * 3
    let x = try Tensor.stack([try radius * (try angle.cos()), try radius * (try angle.sin())], dim: 1)
    let labels = try (try radius.greater(1)).to(.int64) + (try radius.greater(2)).to(.int64)

    let model = Sequential(
        try Linear(2, 64, device: device), ReLU(), try Linear(64, 64, device: device), ReLU(),
        try Linear(64, 3, device: device)
    )
    let steps = 300
    let optimizer = try Adam(model.parameters(), lr: 1e-2)
    let schedule = try CosineAnnealingLR(optimizer, tMax: steps)
    let scaler = try GradScaler(device: device)
    let precision: DType = device == .cpu ? .bfloat16 : .float16

    var first = Float.nan, last = Float.nan
    for step in 0..<steps {
        let loss = try withAutocast(device, dtype: precision) { try crossEntropy(try model(x), labels) }
        try optimizer.zeroGrad()
        try scaler.scale(loss).backward()
        try scaler.unscale(optimizer)
        _ = try clipGradNorm(model.parameters(), maxNorm: 5)
        try scaler.step(optimizer)
        try scaler.update()
        schedule.step()
        let value = try loss.item()
        if step == 0 { first = value }
        last = value
        if step % 50 == 0 { print("step \(step): loss \(value), lr \(optimizer.lr), scale \(try scaler.currentScale())") }
    }
    let predicted = try model.eval()(x).argmax(dim: 1)
    let accuracy = try predicted.equals(labels).to(.float32).mean().item()
    print("loss \(first) -> \(last), accuracy \(accuracy)")
    guard last < first / 4, accuracy > 0.9 else { fail("the model did not learn the rings") }
    if let folder {
        try saveSafetensors(model.stateDict(), to: "\(folder)/model.safetensors", metadata: ["example": "train"])
        try saveSafetensors(["x": x, "logits": try model(x)], to: "\(folder)/outputs.safetensors")
        print("saved \(folder)/model.safetensors")
    }
} catch {
    fail("\(error)")
}
