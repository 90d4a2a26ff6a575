"""The terminal card lays out the allow-listed card without letting card text restyle it."""

from __future__ import annotations

from tests.support.cards import draw


def test_a_completed_card_shows_steps_files_changes_and_the_result() -> None:
    text = draw({"status": "completed", "result": {"resultText": "All done."}, "executionProgress": {
        "backend": "app_server", "steps": [{"title": "Write code", "status": "completed"}],
        "fileChanges": [{"path": "src/a.py", "change": "update"}],
        "branch": {"changedFiles": 1, "insertions": 3, "deletions": 1},
        "tokenUsage": {"totalTokens": 75}}})
    assert "completed on app_server" in text
    assert "✔ Write code" in text
    assert "update src/a.py" in text
    assert "1 file changed, +3 -1" in text and "Branch" not in text
    assert "All done." in text


def test_a_branch_name_is_shown_when_the_workdir_is_a_git_repository() -> None:
    text = draw({"status": "running", "executionProgress": {
        "branch": {"name": "main", "changedFiles": 2, "insertions": 1, "deletions": 0}}})
    assert "main: 2 files changed, +1 -0" in text


def test_markup_in_card_text_is_printed_literally() -> None:
    text = draw({"status": "failed", "executionProgress": {"warnings": [{"message": "[red]boom[/red]"}]},
                 "result": {"error": {"code": "codex_turn_failed", "message": "[bold]x[/bold]"}}})
    assert "[red]boom[/red]" in text
    assert "codex_turn_failed: [bold]x[/bold]" in text
