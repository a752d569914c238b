"""What starts work besides a person: the idle test (activity), reflect, and `ga schedule`'s jobs."""
