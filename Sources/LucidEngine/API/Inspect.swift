/// What an inspection found, as Python's `lucid.amp.inspect` reports it: one entry per op,
/// module path, device and dtype, riskiest first, and a verdict per module.
///
/// ```swift
/// let (loss, report) = try inspect {
///     try withAutocast(.metal, dtype: .float16) { try model(x).sum() }
/// }
/// print(report.markdown)
/// for (module, verdict) in report.modules { print(module, verdict) }
/// ```
public struct InspectionReport: Sendable, CustomStringConvertible {
    /// Every op that ran in a lower precision, riskiest first (`InspectionEntry.risk`).
    public let entries: [InspectionEntry]

    public init(_ entries: [InspectionEntry]) {
        self.entries = entries.sorted { $0.risk > $1.risk }
    }

    /// The entries where something was found: a verdict other than safe, or inf/NaN seen.
    public var findings: [InspectionEntry] { entries.filter(\.flagged) }

    /// Each module path's verdict and one line on why, from its riskiest op ("" when safe),
    /// riskiest module first ("" is ops outside any module or in the top module's own forward).
    public var judgements: [(module: String, verdict: PrecisionVerdict, reason: String)] {
        var seen = Set<String>()
        var out: [(module: String, verdict: PrecisionVerdict, reason: String)] = []
        for e in entries where seen.insert(e.module).inserted {
            out.append((e.module, e.verdict, e.reason))
        }
        // A stable sort: modules of one verdict keep the order of their riskiest op.
        return out.enumerated().sorted { ($0.element.verdict, -$0.offset) > ($1.element.verdict, -$1.offset) }.map(\.element)
    }

    /// Each module path's verdict, riskiest first.
    public var modules: [(module: String, verdict: PrecisionVerdict)] { judgements.map { ($0.module, $0.verdict) } }

    /// The report as two Markdown tables: the modules' verdicts, then every op.
    public var markdown: String {
        var lines = ["| module | verdict | why |", "|---|---|---|"]
        lines += judgements.map { "| `\($0.module.isEmpty ? "<top>" : $0.module)` | \($0.verdict) | \($0.reason) |" }
        lines += [
            "", "| module | op | dtype | calls | max \\|x\\| | overflow | underflow | inf/NaN out | verdict |",
            "|---|---|---|---:|---:|---:|---:|---|---|",
        ]
        for e in entries {
            let out = e.madeNonfinite ? "made here" : (e.nonfiniteResult ? "passed on" : "no")
            lines.append(
                "| `\(e.module.isEmpty ? "<top>" : e.module)` | \(e.op) | \(e.dtype) | \(e.calls) | \(e.inputs.maxAbs) | "
                    + "\(percent(e.overflow)) | \(percent(e.underflow)) | \(out) | \(e.verdict) |")
        }
        return lines.joined(separator: "\n")
    }

    public var description: String { markdown }

    private func percent(_ x: Double) -> String { "\((x * 10000).rounded() / 100)%" }
}

extension InspectionEntry {
    /// Whether this op is safe in float16, needs bfloat16's range or needs float32.
    public var verdict: PrecisionVerdict { judgement.verdict }
    /// The first finding behind the verdict, as one line ("" when safe).
    public var reason: String { judgement.reason }

    /// The share of input values past the target dtype's finite range.
    public var overflow: Double {
        share(inputs[dtype == .float16 ? .overflowFloat16 : .overflowBFloat16], of: inputElements)
    }
    /// The share of non-zero input values the cast makes subnormal or zero.
    public var underflow: Double {
        share(inputs[dtype == .float16 ? .underflowFloat16 : .underflowBFloat16], of: inputs[.nonzero])
    }
    /// Whether the result held an infinity or NaN.
    public var nonfiniteResult: Bool { results[.nonfinite] > 0 }

    /// Whether anything was found: a verdict other than safe, or inf/NaN in or out.
    public var flagged: Bool { verdict != .safeFloat16 || nonfiniteResult || inputs[.nonfinite] > 0 }

    /// The order of risk, as Python's `OpRecord.risk`: verdict, inf/NaN made here, overflow,
    /// inf/NaN in the result, underflow, largest magnitude.
    public var risk: Risk { Risk(entry: self) }

    /// An entry's place in the order of risk (greater: riskier).
    public struct Risk: Comparable, Sendable {
        let keys: [Double]
        init(entry e: InspectionEntry) {
            keys = [
                Double(e.verdict.rawValue), e.madeNonfinite ? 1 : 0, e.overflow, e.nonfiniteResult ? 1 : 0, e.underflow,
                Double(e.inputs.maxAbs),
            ]
        }
        public static func < (a: Risk, b: Risk) -> Bool { a.keys.lexicographicallyPrecedes(b.keys) }
    }

    private func share(_ count: Int, of total: Int) -> Double { total == 0 ? 0 : Double(count) / Double(total) }
}

/// Runs `body` with an inspection live on the calling thread and returns its result and what
/// the inspection found: for every op that ran in float16 or bfloat16 under autocast, its
/// inputs before the cast and its result, counted on their device (nothing is read back
/// before the end), under the path of the module whose call ran it (`encoder.0.self_attn`).
/// Inspections nest; each sees the ops run while it is live.
public func inspect<R>(_ body: () throws -> R) throws -> (result: R, report: InspectionReport) {
    let id = AutocastInspection.begin()
    AutocastInspection.setModule(ModuleCalls.currentPath)
    let result: R
    do {
        result = try body()
    } catch {
        _ = try? AutocastInspection.end(id)
        throw error
    }
    return (result, InspectionReport(try AutocastInspection.end(id)))
}
