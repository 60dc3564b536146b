"""The checker of English left in Chinese output finds it, and passes what every language
writes the same."""

from __future__ import annotations

from tests.support.english import stray_english


def test_finds_english_sentences_and_passes_code_and_data() -> None:
    assert stray_english("节点 n1 已添加") == []
    assert stray_english("node n1 added", data=["n1"]) == ["node", "added"]
    assert stray_english("用 `zuka node add NAME --gpus 8` 添加，见 /var/lib/zuka/ledger.db") == []
    assert stray_english("8 张 H100，显存 80 GiB，NVLink 已连接") == []
    assert (
        stray_english("zuka lease add 添加租约；$ZUKA_LEDGER 或 [ui] lang 或 alerts.lease_end")
        == []
    )
    assert stray_english("see https://example.com/docs for more") == ["see", "for", "more"]
    assert stray_english("供应商 阿里云-华东 ok", data=["阿里云-华东"]) == []


def test_a_whole_command_and_snake_case_names_are_typed_words() -> None:
    text = "请运行 zuka node edit m1 --state offboarding 后再试；字段 unit_price (--price) 有误"
    assert stray_english(text) == []
    assert stray_english("zuka node list 之后 please wait") == ["please", "wait"]
