/// Host softmax: oneDNN where it is linked; elsewhere the op layer composes it.
extension HostBackend: SoftmaxKernels {
    func softmax(_ x: TensorImpl, axis: Int, log: Bool, into out: TensorImpl) -> Bool {
#if canImport(CDNNL)
        return DNNL.softmax(x, axis: axis, log: log, into: out)
#else
        return false
#endif
    }
}
