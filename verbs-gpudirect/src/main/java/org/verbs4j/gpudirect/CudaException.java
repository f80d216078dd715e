package org.verbs4j.gpudirect;

import org.verbs4j.VerbsException;

/**
 * A CUDA driver API call that failed: the function, its {@code CUresult} by name
 * ({@code CUDA_ERROR_OUT_OF_MEMORY}) and the driver's own description, and what to do. The
 * errno is the nearest POSIX one (ENOMEM, EINVAL, EOPNOTSUPP, ENODEV; EIO otherwise). Immutable.
 */
public class CudaException extends VerbsException {
    private static final long serialVersionUID = 1L;
    // errno values (Linux x86_64 <errno.h>), checked against gcc by CudaBindingConformanceTest
    static final int ENOMEM = 12, EINVAL = 22, ENODEV = 19, EOPNOTSUPP = 95, EIO = 5, EFAULT = 14;

    /** The {@code CUresult} the driver returned. */
    private final int result;
    /** Its name, e.g. {@code CUDA_ERROR_OUT_OF_MEMORY}. */
    private final String resultName;

    CudaException(String function, int result, String resultName, String description, String hint) {
        super(function, errnoOf(resultName), resultName + " (" + result + "): " + description, hint);
        this.result = result;
        this.resultName = resultName;
    }

    private static int errnoOf(String name) {
        return switch (name) {
            case "CUDA_ERROR_OUT_OF_MEMORY" -> ENOMEM;
            case "CUDA_ERROR_INVALID_VALUE", "CUDA_ERROR_INVALID_DEVICE" -> EINVAL;
            case "CUDA_ERROR_NOT_SUPPORTED" -> EOPNOTSUPP;
            case "CUDA_ERROR_NO_DEVICE", "CUDA_ERROR_NOT_INITIALIZED" -> ENODEV;
            default -> EIO;
        };
    }

    /** The {@code CUresult} the driver returned. */
    public int result() {
        return result;
    }

    /** Its name, e.g. {@code CUDA_ERROR_OUT_OF_MEMORY}. */
    public String resultName() {
        return resultName;
    }
}
