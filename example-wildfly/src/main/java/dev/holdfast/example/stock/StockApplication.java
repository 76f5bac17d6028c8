package dev.holdfast.example.stock;

import jakarta.ws.rs.ApplicationPath;
import jakarta.ws.rs.core.Application;

/** The stock service's REST endpoints, under the WAR's context root. */
@ApplicationPath("/")
public class StockApplication extends Application {
}
