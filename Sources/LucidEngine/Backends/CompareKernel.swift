/// Elementwise comparisons: operands share a dtype, the output is bool.
package enum CompareKernel: Int32, Sendable, CaseIterable {
    case eq = 0, ne, lt, le, gt, ge

    /// The op's name, without the cost of reflecting the case ("\(k)").
    var name: String {
        switch self {
        case .eq: "eq"
        case .ne: "ne"
        case .lt: "lt"
        case .le: "le"
        case .gt: "gt"
        case .ge: "ge"
        }
    }
}
