"""Test rig shared by the test files: a Messages API stub and the real CLI's whereabouts."""
