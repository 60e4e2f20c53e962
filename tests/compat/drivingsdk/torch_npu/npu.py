"""``torch_npu.npu`` stand-in: the device queries DrivingSDK's tests make."""


def get_device_name(device=0) -> str:
    return "CPU (torch_npu stand-in)"


def is_available() -> bool:
    return False


def synchronize(device=None) -> None:
    pass
