# sessions.py
from agents import SessionSettings, SQLiteSession


def make_session():
    return SQLiteSession("check", session_settings=SessionSettings(limit=20))
