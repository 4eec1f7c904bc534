"""The book of tokens where its file cannot be written (a full disk): the write is refused whole, and the tokens stay
as the file says."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from flexq.auth import Role, TokenBook, TokensUnwritable
from flexq.auth import tokens as token_module


def _full_disk(path: Path, text: str) -> None:
    raise OSError(errno.ENOSPC, "No space left on device", str(path))


def test_a_book_that_cannot_be_written_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    book = TokenBook(tmp_path)
    admin = book.ensure_admin()
    alice, _ = book.create(Role.DEVELOPER, "team-a", "alice")
    before = book.list()
    monkeypatch.setattr(token_module, "_write_private", _full_disk)
    with pytest.raises(TokensUnwritable) as refused:
        book.create(Role.DEVELOPER, "team-b", "bob")
    assert str(refused.value) == (f"the tokens could not be written: No space left on device ({tmp_path}/auth/"
                                  "tokens.json): nothing was changed; free space there and try again")
    with pytest.raises(TokensUnwritable):
        book.revoke("alice")
    assert book.list() == before, "neither bob's token nor alice's revocation is kept in memory"
    identified = book.identify(alice)
    assert identified is not None and identified.user == "alice", "what the file says holds"
    assert TokenBook(tmp_path).list() == before
    monkeypatch.undo()
    book.revoke("alice")
    assert book.identify(alice) is None and book.identify(admin) is not None
