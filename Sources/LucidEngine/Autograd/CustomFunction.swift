/// Functions whose backward is written by the caller (Python's `lucid.autograd.Function`): the
/// caller computes the output itself, untracked, and records it here with a backward rule.
package enum CustomFunctions {
    /// `output` tracked as the result of a function of `inputs` named `name`, whose backward
    /// turns the output's gradient into one gradient (or nil) per input. The rule's answers
    /// are checked (count, shape, device) and cast to each input's dtype, as PyTorch does.
    package static func record(
        output: TensorImpl, inputs: [TensorImpl], name: String,
        backward: @escaping (TensorImpl) throws -> [TensorImpl?]
    ) throws -> TensorImpl {
        guard GradMode.isEnabled, inputs.contains(where: { $0.requiresGrad }) else { return output }
        let node = "\(name)Backward"
        return Autograd.record(output.withRequiresGrad(false), node, inputs) { g in
            let grads = try backward(g)
            guard grads.count == inputs.count else {
                throw LucidError.value(
                    "\(node): backward returned \(grads.count) gradients, expected \(inputs.count) (one per tensor input, None where there is none)")
            }
            return try zip(grads, inputs).enumerated().map { i, pair -> TensorImpl? in
                guard let grad = pair.0 else { return nil }
                let input = pair.1
                guard grad.shape == input.shape else {
                    throw LucidError.value("\(node): gradient \(i) has shape \(grad.shape), but its input has shape \(input.shape)")
                }
                guard grad.device == input.device else {
                    throw LucidError.value("\(node): gradient \(i) is on \(grad.device), but its input is on \(input.device)")
                }
                guard grad.dtype.isFloatingPoint else {
                    throw LucidError.type("\(node): gradient \(i) must be floating point, got \(grad.dtype)")
                }
                return grad.dtype == input.dtype ? grad : try Ops.cast(grad, to: input.dtype)
            }
        }
    }
}
