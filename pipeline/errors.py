"""The one exception type the CLI turns into a clean error line."""


class PassbandError(Exception):
    """An error the user can fix: bad input, bad config, missing file. The CLI prints it in one line."""
