"""Which Kineto event categories feed which table bucket."""

# Kineto has renamed categories over the years; all spellings land in one bucket.
BUCKET_OF_CATEGORY = {
    "cpu_op": "ops",
    "Operator": "ops",
    "operator": "ops",
    "user_annotation": "ops",
    "User Annotation": "ops",
    "python_function": "frames",
    "cuda_runtime": "runtime",
    "Runtime": "runtime",
    "runtime": "runtime",
    "cuda_driver": "runtime",
    "Driver": "runtime",
    "driver": "runtime",
    "kernel": "kernel",
    "Kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "Memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "Memset": "memset",
    "memset": "memset",
    "cuda_sync": "waits",
    "gpu_user_annotation": "gpu_annotations",
    "async_gpu": "gpu_annotations",
}
