/// A node of the backward graph: the op that made a tensor, the inputs gradients flow to,
/// and the rule turning the output's gradient into theirs (nil entries for inputs that do
/// not require gradients). The rule is dropped once a backward pass has used it, unless the
/// graph is retained.
package final class GradNode: @unchecked Sendable {
    /// Where one input's gradient goes: the node that made it, or the leaf itself. A node
    /// keeps no reference to an intermediate input tensor, so an activation's memory is held
    /// only while a rule needs its values.
    struct Edge {
        let node: GradNode?
        let leaf: TensorImpl?
        let dtype: DType

        init(_ t: TensorImpl) {
            node = t.gradFn
            leaf = t.gradFn == nil ? t : nil
            dtype = t.dtype
        }
    }

    package let name: String
    let inputs: [Edge?]
    private var rule: ((TensorImpl) throws -> [TensorImpl?])?
    /// A rule that saves no tensors (a dtype cast) is kept after backward: autocast's weight
    /// cache reuses a cast, and its node, across the graphs of one scope.
    let savesNothing: Bool

    init(name: String, inputs: [Edge?], savesNothing: Bool = false, rule: @escaping (TensorImpl) throws -> [TensorImpl?]) {
        self.name = name
        self.inputs = inputs
        self.savesNothing = savesNothing
        self.rule = rule
    }

    func gradients(for grad: TensorImpl) throws -> [TensorImpl?] {
        guard let rule else {
            throw LucidError.runtime("backward through \(name) a second time: its saved tensors were freed after the first backward; pass retain_graph=True to the first call")
        }
        return try rule(grad)
    }

    func release() { if !savesNothing { rule = nil } }
}
