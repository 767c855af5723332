#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Geometry of a sliding 2-D window over [N, C, H, W] input: `im2col` gathers each window
/// into a column of [N, C·kh·kw, oh·ow], `col2im` sums columns back.
struct WindowGeometry: Sendable, Equatable {
    var kernel: (Int, Int), stride: (Int, Int), padding: (Int, Int), dilation: (Int, Int)
    var input: (Int, Int), output: (Int, Int)

    static func == (a: Self, b: Self) -> Bool {
        a.kernel == b.kernel && a.stride == b.stride && a.padding == b.padding && a.dilation == b.dilation
            && a.input == b.input && a.output == b.output
    }
}

/// One 2-D convolution: NCHW input [batch, channels, inH, inW], weights [outChannels,
/// channels/groups, kH, kW], output [batch, outChannels, outH, outW].
struct ConvolutionProblem: Hashable, Sendable {
    var batch: Int, channels: Int, outChannels: Int, groups: Int
    var inH: Int, inW: Int, outH: Int, outW: Int
    var kH: Int, kW: Int, strideH: Int, strideW: Int, padH: Int, padW: Int, dilH: Int, dilW: Int
    var dtype: DType

    init(batch: Int, channels: Int, outChannels: Int, groups: Int, _ g: WindowGeometry, dtype: DType) {
        (self.batch, self.channels, self.outChannels, self.groups) = (batch, channels, outChannels, groups)
        (inH, inW, outH, outW) = (g.input.0, g.input.1, g.output.0, g.output.1)
        (kH, kW, strideH, strideW) = (g.kernel.0, g.kernel.1, g.stride.0, g.stride.1)
        (padH, padW, dilH, dilW) = (g.padding.0, g.padding.1, g.dilation.0, g.dilation.1)
        self.dtype = dtype
    }
}

/// The passes of a convolution.
enum ConvolutionPassKind: Int, Hashable, Sendable { case forward, backwardData, backwardWeights }

/// Reductions over a set of axes.
package enum ReduceKernel: Sendable { case sum, mean }

/// A scalar operand, kept in the widest form of its kind so that a float16 tensor plus 0.1
/// computes with float32 0.1, not a float16-rounded one.
struct Scalar: Sendable {
    var double: Double
    var int: Int64
    init(_ d: Double) { double = d; int = Int64(exactly: d.rounded(.towardZero)) ?? 0 }
    init(int i: Int64) { double = Double(i); int = i }
}

/// Hyper-parameters of one SGD update (PyTorch's `torch.optim.SGD`).
struct SGDHyper: Sendable {
    var lr: Double, momentum: Double, dampening: Double, weightDecay: Double
    var nesterov: Bool, maximize: Bool, firstStep: Bool
}

/// Hyper-parameters of one Adam/AdamW update. The step count is a tensor of the parameter's
/// device (PyTorch's `state["step"]`), so that a step skipped on the device does not count.
struct AdamHyper: Sendable {
    var lr: Double, beta1: Double, beta2: Double, eps: Double, weightDecay: Double
    var decoupled: Bool, maximize: Bool

    /// The update in PyTorch's form, p -= lr / bc1 · m / (sqrt(v) / sqrt(bc2) + eps), with
    /// d = sign · g + coupled · p and p scaled by `shrink` first for decoupled weight decay;
    /// in float32 (a GPU's kernels take these).
    var sign: Float { maximize ? -1 : 1 }
    var coupled: Float { decoupled ? 0 : Float(weightDecay) }
    var shrink: Float { decoupled ? 1 - Float(lr) * Float(weightDecay) : 1 }

    /// The step's constants in the real type `R` the parameter computes in, at 1-based step
    /// `step`: float32 as a GPU computes them from the step it reads, float64 for float64.
    func constants<R: HostReal>(_: R.Type, step: Float) -> (stepSize: R, bc2Root: R, sign: R, coupled: R, shrink: R) {
        if R.self == Float.self {
            let bc1 = Float(1 - pow(Double(Float(beta1)), Double(step)))
            let bc2 = Float(1 - pow(Double(Float(beta2)), Double(step)))
            return (R(Float(lr) / bc1), R(bc2.squareRoot()), R(sign), R(coupled), R(shrink))
        }
        let bc1 = 1 - pow(beta1, Double(step)), bc2 = 1 - pow(beta2, Double(step))
        return (
            R(lr / bc1), R(bc2.squareRoot()), R(sign), R(decoupled ? 0 : weightDecay),
            R(decoupled ? 1 - lr * weightDecay : 1)
        )
    }
}

/// How GradScaler adapts its scale after a step (PyTorch's `_amp_update_scale_`).
struct ScaleUpdate: Sendable {
    var growthFactor: Float, backoffFactor: Float, growthInterval: Int32
}
