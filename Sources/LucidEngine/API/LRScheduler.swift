#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A learning-rate schedule: sets its optimizer's `lr` from the base rate and the epoch
/// count, with the closed forms of PyTorch's schedulers (as Python's `lucid.optim.lr_scheduler`
/// computes them), so that epoch k's rate is exact however many steps led there.
///
/// Making a schedule takes its first step (epoch 0): the optimizer starts at the base rate.
/// Call `step()` once per epoch, after the optimizer's steps.
///
/// ```swift
/// let opt = try SGD(params, lr: 0.1)
/// let schedule = try CosineAnnealingLR(opt, tMax: 100)
/// for epoch in 0..<100 {
///     // ... train one epoch with opt ...
///     schedule.step()
/// }
/// ```
public class LRScheduler {
    public let optimizer: Optimizer
    /// The rate of epoch 0: the optimizer's `initialLR` (which the first schedule made for it
    /// records, and its state dict keeps).
    public let baseLR: Double
    /// The epoch whose rate the optimizer has (-1 before the first step).
    public private(set) var lastEpoch: Int
    /// The rate the last `step()` set.
    public private(set) var lastLR: Double

    /// A schedule for `optimizer`; `lastEpoch` -1 starts a new one, k >= 0 resumes after
    /// epoch k (the optimizer must then have an `initialLR`, as one loaded from a checkpoint
    /// of a scheduled optimizer has).
    init(_ optimizer: Optimizer, lastEpoch: Int) throws {
        guard lastEpoch >= -1 else {
            throw LucidError.value("lastEpoch must be -1 (a new schedule) or the index of the last finished epoch, got \(lastEpoch)")
        }
        if lastEpoch == -1 {
            if optimizer.initialLR == nil { optimizer.initialLR = optimizer.lr }
        } else if optimizer.initialLR == nil {
            throw LucidError.value(
                "the optimizer has no initialLR, which resuming a schedule (lastEpoch: \(lastEpoch)) needs; load its state dict first")
        }
        self.optimizer = optimizer
        baseLR = optimizer.initialLR!
        self.lastEpoch = lastEpoch
        lastLR = optimizer.lr
    }

    /// The rate at `epoch` for a base rate `baseLR`.
    public func lr(at epoch: Int) -> Double { baseLR }

    /// Advances one epoch and sets the optimizer's `lr`.
    public func step() {
        lastEpoch += 1
        lastLR = lr(at: lastEpoch)
        optimizer.lr = lastLR
    }
}

/// Multiplies the rate by `gamma` every `stepSize` epochs: `baseLR * gamma^(epoch / stepSize)`.
public final class StepLR: LRScheduler {
    public let stepSize: Int
    public let gamma: Double

    public init(_ optimizer: Optimizer, stepSize: Int, gamma: Double = 0.1, lastEpoch: Int = -1) throws {
        guard stepSize > 0 else { throw LucidError.value("StepLR: stepSize must be a positive integer, got \(stepSize)") }
        guard gamma >= 0, gamma.isFinite else { throw LucidError.value("StepLR: gamma must be a finite number >= 0, got \(gamma)") }
        self.stepSize = stepSize
        self.gamma = gamma
        try super.init(optimizer, lastEpoch: lastEpoch)
        step()
    }

    public override func lr(at epoch: Int) -> Double { baseLR * pow(gamma, Double(epoch / stepSize)) }
}

/// Anneals from the base rate to `etaMin` along half a cosine over `tMax` epochs:
/// `etaMin + (baseLR - etaMin) * (1 + cos(pi * epoch / tMax)) / 2` (and back up after, as
/// PyTorch's closed form does).
public final class CosineAnnealingLR: LRScheduler {
    public let tMax: Int
    public let etaMin: Double

    public init(_ optimizer: Optimizer, tMax: Int, etaMin: Double = 0, lastEpoch: Int = -1) throws {
        guard tMax > 0 else { throw LucidError.value("CosineAnnealingLR: tMax must be a positive integer, got \(tMax)") }
        // Optimizers refuse negative rates, so the schedule may not reach one.
        guard etaMin >= 0, etaMin.isFinite else {
            throw LucidError.value("CosineAnnealingLR: etaMin must be a finite number >= 0, got \(etaMin)")
        }
        self.tMax = tMax
        self.etaMin = etaMin
        try super.init(optimizer, lastEpoch: lastEpoch)
        step()
    }

    public override func lr(at epoch: Int) -> Double {
        etaMin + (baseLR - etaMin) * (1 + cos(Double.pi * Double(epoch) / Double(tMax))) / 2
    }
}
