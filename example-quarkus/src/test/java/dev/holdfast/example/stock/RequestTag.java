package dev.holdfast.example.stock;

import jakarta.enterprise.context.RequestScoped;

/** A request-scoped value for {@link AsyncLockedArcTest}: which request a call belongs to. */
@RequestScoped
public class RequestTag {
  private String value;

  public String value() {
    return value;
  }

  public void set(String value) {
    this.value = value;
  }
}
