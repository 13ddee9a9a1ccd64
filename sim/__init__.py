"""The multiprocess shared-memory simulator of Ascend NPUs (backend 'sim')."""
