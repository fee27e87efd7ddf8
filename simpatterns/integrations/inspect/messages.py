"""Our chat messages (OpenAI form: role, text or content parts with data-URL images) as Inspect's."""

from __future__ import annotations

from typing import Any

from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    ContentImage,
    ContentText,
)


def _content(content: str | list[dict[str, Any]]) -> str | list[ContentText | ContentImage]:
    if isinstance(content, str):
        return content
    out: list[ContentText | ContentImage] = []
    for part in content:
        if part["type"] == "text":
            out.append(ContentText(text=part["text"]))
        elif part["type"] == "image_url":
            out.append(ContentImage(image=part["image_url"]["url"]))
        else:
            raise ValueError(f"content part of type {part['type']!r} has no Inspect form")
    return out


def to_inspect(messages: list[dict[str, Any]]) -> list[ChatMessage]:
    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
    return [kinds[m["role"]](content=_content(m["content"])) for m in messages]
