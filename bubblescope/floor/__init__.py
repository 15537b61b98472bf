"""The speed-of-light floor: HBM and host bandwidth, a bare trace's floor, and each kernel's achieved
bandwidth against it. torch only where bandwidth is measured on CUDA, imported lazily."""
